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


def _msgids(catalogue: str) -> set[str]:
    ids, current = set(), None
    for line in catalogue.splitlines():
        if line.startswith("msgid "):
            current = [line[7:-1]]
        elif line.startswith('"') and current is not None:
            current.append(line[1:-1])
        else:
            if current is not None:
                ids.add("".join(current))
            current = None
    return ids - {""}


def test_every_translatable_string_in_the_code_is_in_the_catalogue():
    sources = [
        str(path)
        for app in ("cocoon", "sandboxes", "agents", "egress", "scheduling", "usage", "attention", "ui")
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
    ]
    extracted = subprocess.run(
        [
            "xgettext",
            "--language=Python",
            "--from-code=UTF-8",
            "--keyword=_",
            "--keyword=gettext_lazy",
            "-o",
            "-",
            *sources,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    missing = _msgids(extracted) - _msgids((CATALOGUE / "django.po").read_text())
    assert not missing, f"run makemessages and translate: {sorted(missing)}"
