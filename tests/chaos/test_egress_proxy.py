"""Chaos (issue #14): the egress proxy is killed, or handed a policy file it cannot use. Traffic resumes
by itself within a bound, with the last good policy, and the outage or the refusal is reported where the
operator looks (egress.status, system.setup_status)."""

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.chaos.faults import egress_sandbox, proxy_container, settle
from tests.conftest import Cocoond, remove_instance_objects, wait_until
from tests.test_egress import curl

pytestmark = pytest.mark.e2e
RECOVERY_S = 10  # the egress tick looks every 2 s


@pytest.fixture(scope="module")
def own(tmp_path_factory, docker_client, sandbox_image, upstream) -> Iterator[tuple[Cocoond, dict[str, Any]]]:
    """A cocoond of this module's own (its proxy is the one killed, nobody else's) with an egress sandbox."""
    instance = Cocoond(data=tmp_path_factory.mktemp("egress-chaos") / "data")
    try:
        instance.start()
        yield instance, egress_sandbox(instance, upstream, sandbox_image)
    finally:
        instance.stop()
        remove_instance_objects(docker_client, instance.instance)


def proxy_item(cocoond: Cocoond) -> dict[str, Any]:
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    return items["egressProxy"]


def served_as_before(cocoond: Cocoond, sandbox: dict[str, Any], tag: str) -> None:
    """The last good policy holds: the allowed host is reached, the denied one refused."""
    assert curl(cocoond, sandbox, f"http://allowed.invalid/{tag}") == (
        200,
        f"upstream allowed.invalid /{tag}",
    )
    assert curl(cocoond, sandbox, f"http://denied.invalid/{tag}")[0] == 403


def green(cocoond: Cocoond) -> dict[str, Any]:
    status = cocoond.call("egress.status")
    assert status["running"], status
    assert status["policyError"] is None, status
    assert status["acknowledgedVersion"] == status["policyVersion"] is not None, status
    assert proxy_item(cocoond)["ok"], proxy_item(cocoond)
    return status


def started_after(container: Any, moment: float) -> bool:
    container.reload()
    started = container.attrs["State"]["StartedAt"][:26].rstrip("Z")  # microseconds are enough
    return datetime.fromisoformat(started + "+00:00").timestamp() > moment


def test_a_killed_proxy_comes_back_by_itself_and_traffic_resumes(own, docker_client):
    cocoond, sandbox = own
    served_as_before(cocoond, sandbox, "before")
    version = green(cocoond)["policyVersion"]
    proxy = proxy_container(docker_client, cocoond.instance)
    killed_at = time.time()
    proxy.kill()  # SIGKILL; `docker kill` also keeps the engine's restart policy from acting
    proxy.reload()
    assert proxy.status == "exited" or started_after(proxy, killed_at), proxy.status
    # Until it is back, the outage is what both reports say: never green for a dead proxy. (cocoond's
    # egress tick may already have started it again: then it is a new process, started after the kill.)
    # The two reports are read one after the other: the tick may restart the proxy in between.
    status = cocoond.call("egress.status")
    if status["running"]:
        assert started_after(proxy, killed_at), status
    else:
        assert status["acknowledgedVersion"] is None, status
    item = proxy_item(cocoond)
    if item["ok"] or "not running" not in item["detail"]:
        assert started_after(proxy, killed_at), item

    started = time.monotonic()
    settle(lambda: served_as_before(cocoond, sandbox, "after"), bound_s=RECOVERY_S)
    assert time.monotonic() - started < RECOVERY_S
    assert started_after(proxy, killed_at)
    assert green(cocoond)["policyVersion"] == version  # the same policy, loaded by the new process
    assert proxy_container(docker_client, cocoond.instance).id == proxy.id  # restarted, not replaced


def write_behind_cocoonds_back(cocoond: Cocoond, content: str) -> None:
    path = cocoond.data / "egress" / "policy.json"
    temporary = path.with_name(".policy.json.chaos")
    temporary.write_text(content)
    os.replace(temporary, path)


def test_a_policy_file_the_proxy_cannot_use_is_refused_and_the_last_good_one_serves(own):
    cocoond, sandbox = own
    good = green(cocoond)
    document = json.loads((cocoond.data / "egress" / "policy.json").read_text())
    unusable = {
        "cut short": json.dumps(document)[:40],
        "not an object": json.dumps([document]),
        "a host it cannot read": json.dumps(
            document | {"version": good["policyVersion"] + 1, "allowlist": ["a..b"]}
        ),
    }
    for name, content in unusable.items():
        write_behind_cocoonds_back(cocoond, content)
        status = wait_until(lambda: (s := cocoond.call("egress.status"))["policyError"] and s, timeout=5)
        assert status["running"], (name, status)
        assert status["acknowledgedVersion"] == good["policyVersion"], (name, status)
        item = proxy_item(cocoond)
        assert not item["ok"], (name, item)
        assert "refused" in item["detail"], (name, item)
        served_as_before(cocoond, sandbox, "during")

    # The next valid publish is loaded and acknowledged at once (egress.allow waits for the ack).
    cocoond.call("egress.allow", {"host": "later.allowed.invalid"})
    assert green(cocoond)["policyVersion"] > good["policyVersion"]
    served_as_before(cocoond, sandbox, "after")


def test_a_proxy_killed_mid_stream_loses_no_usage_it_counted_and_counts_nothing_twice(own, docker_client):
    """A stream's usage is recorded at its start: the proxy killed before its end leaves that record,
    once, also after cocoond restarts (which reads the proxy's file again if it had not removed it)."""
    from tests.test_egress import STANDIN, STANDIN_KEY, sh
    from tests.upstream import SLOW_USAGE

    cocoond, sandbox = own
    cocoond.call("settings.update", {"providers": {"standin": STANDIN}})
    cocoond.call("secrets.set", {"name": "STANDIN_SECRET", "value": STANDIN_KEY})
    agent = cocoond.call(
        "agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell", "providers": ["standin"]}
    )
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
    cocoond.call(
        "agent.send_input",
        {
            "agentId": agent["id"],
            "text": 'curl -sSN -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/slow-messages"',
        },
    )

    def started() -> list[dict[str, Any]]:
        return cocoond.call("usage.records", {"agentId": agent["id"]})["records"]

    [record] = wait_until(started, timeout=20)  # the stream's start, while its end is still 20 s off
    assert (record["inputTokens"], record["outputTokens"], record["complete"]) == (
        SLOW_USAGE["input_tokens"],
        1,
        False,
    )
    proxy_container(docker_client, cocoond.instance).kill()
    cocoond.restart()
    time.sleep(5)  # two of the usage ticks
    assert started() == [record]
    assert sh(cocoond, sandbox, "true")["exitCode"] == 0
