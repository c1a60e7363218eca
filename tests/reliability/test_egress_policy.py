"""One bad setting never takes egress down for everyone (issue #14, 1): what the proxy could not use is
refused at write time, and a document that reaches it anyway is refused by the proxy, which keeps
serving the last good policy and says why where the operator looks."""

import json
import os

import pytest

from tests.conftest import wait_until
from tests.test_egress import curl

pytestmark = pytest.mark.e2e


def write_policy(cocoond, document):
    path = cocoond.data / "egress" / "policy.json"
    temporary = path.with_name(".policy.json.test")
    temporary.write_text(json.dumps(document))
    os.replace(temporary, path)


def test_a_policy_the_proxy_cannot_use_is_refused_and_the_last_good_one_keeps_serving(cocoond, egress):
    assert curl(cocoond, egress, "http://allowed.invalid/before")[0] == 200
    good = json.loads((cocoond.data / "egress" / "policy.json").read_text())
    # Written behind cocoond's back: the write-time check would have refused this entry.
    write_policy(cocoond, good | {"version": good["version"] + 1, "allowlist": ["soc-zz..lico"]})
    status = wait_until(lambda: (s := cocoond.call("egress.status"))["policyError"] and s)
    assert status["running"] is True
    assert status["acknowledgedVersion"] == good["version"]
    assert curl(cocoond, egress, "http://allowed.invalid/during")[0] == 200  # the last good policy
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    assert items["egressProxy"]["ok"] is False
    assert "refused" in items["egressProxy"]["detail"]

    # The next valid change is loaded as usual, and answers at once rather than after a timeout.
    cocoond.call("egress.allow", {"host": "later.allowed.invalid"})
    status = cocoond.call("egress.status")
    assert status["policyError"] is None
    assert status["acknowledgedVersion"] == status["policyVersion"]
    assert curl(cocoond, egress, "http://allowed.invalid/after")[0] == 200


def test_settings_the_proxy_could_not_use_are_refused_at_write_time(cocoond):
    before = cocoond.call("settings.get")
    for patch, path in (
        ({"egress": {"hosts": {"a..b.invalid": "192.0.2.1"}}}, "egress.hosts"),
        ({"egress": {"caBundle": "not a certificate"}}, "egress.caBundle"),
        (
            {"providers": {"bad": {"kind": "http", "baseUrl": "http://soc-zz..lico/v1"}}},
            "providers.bad.baseUrl",
        ),
        (
            {"providers": {"bad": {"kind": "http", "baseUrl": "https://host.invalid:99999/"}}},
            "providers.bad.baseUrl",
        ),
    ):
        answer = cocoond.post("settings.update", patch)
        assert answer.status_code == 400, (patch, answer.text)
        assert any(f["path"].startswith(path) for f in answer.json()["error"]["details"]["fields"]), (
            answer.text
        )
    assert cocoond.call("settings.get") == before
