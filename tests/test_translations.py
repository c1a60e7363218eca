"""The compiled German catalogue matches its source, and every message is translated."""

import shutil
import subprocess

import pytest

from tests.conftest import ROOT

CATALOGUE = ROOT / "cocoon/locale/de/LC_MESSAGES"


def test_the_committed_mo_file_is_compiled_from_the_po_file(tmp_path):
    if shutil.which("msgfmt") is None:
        pytest.fail("msgfmt (gettext) is not installed: run scripts/provision")
    compiled = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "--check", "-o", compiled, CATALOGUE / "django.po"], check=True)
    assert compiled.read_bytes() == (CATALOGUE / "django.mo").read_bytes()


@pytest.mark.parametrize("which", ["--untranslated", "--only-fuzzy"])
def test_no_message_is_left_untranslated_or_fuzzy(which):
    result = subprocess.run(
        ["msgattrib", which, "--no-obsolete", CATALOGUE / "django.po"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == ""
