"""Lateral movement between sandboxes (issue 13, item 8): a sandbox cannot open a TCP connection to
another sandbox in any network mode, while each still reaches the egress proxy (and, when open, the
outside) as its mode allows."""

import json

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

PORT = 8765
# The base image has perl but no nc or python: a listener that greets every connection.
LISTEN = (
    f"setsid -f perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => {PORT}, Listen => 5, "
    'ReuseAddr => 1) or die; while ($c = $s->accept) { print $c "reached\\n"; close $c }\' '
    ">/dev/null 2>&1 </dev/null"
)


def sh(cocoond, sandbox, script):
    return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["bash", "-c", script]})


def greeting(cocoond, sandbox, host, port=PORT):
    """The first bytes a TCP server at host:port sends this sandbox ("" if it cannot connect)."""
    probe = f"timeout 3 bash -c 'exec 3<>/dev/tcp/{host}/{port} && head -c 7 <&3'"
    return sh(cocoond, sandbox, probe)["stdout"]


def address(sandbox):
    [ip] = sandbox["ips"].values()
    return ip


@pytest.fixture(scope="module")
def fleet(cocoond, sandbox_image):
    """Two sandboxes per mode with network, one without, each listening on PORT."""
    made = {
        name: cocoond.call("sandbox.create", {"network": name.rstrip("12"), "image": sandbox_image})
        for name in ("egress1", "egress2", "open1", "open2", "none")
    }
    for sandbox in made.values():
        sh(cocoond, sandbox, LISTEN)
    yield made
    for sandbox in made.values():
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("egress1", "egress2"),
        ("open1", "open2"),
        ("open1", "egress1"),
        ("egress1", "open1"),
        ("none", "egress1"),
        ("none", "open1"),
    ],
)
def test_a_sandbox_cannot_connect_to_another(cocoond, fleet, source, target):
    host = address(fleet[target])
    # The listener is there: the target reaches itself at that address.
    assert wait_until(lambda: greeting(cocoond, fleet[target], host) == "reached", timeout=10)
    assert greeting(cocoond, fleet[source], host) == ""


def proxy_answer(cocoond, sandbox):
    """What the credential proxy answers a route this sandbox has no grant for (its error code)."""
    answer = sh(cocoond, sandbox, "curl -sS --max-time 5 http://cocoon-proxy:8080/p-nothing/v1/models")
    try:
        return json.loads(answer["stdout"])["error"]["code"]
    except ValueError:
        return answer["stderr"]


@pytest.mark.parametrize("name", ["egress1", "open1"])
def test_each_sandbox_still_reaches_the_proxy_which_knows_it(cocoond, fleet, name):
    # no_grant, not unknown_source: the proxy knows the sandbox by its address on its own network.
    assert wait_until(lambda: proxy_answer(cocoond, fleet[name]) == "no_grant", timeout=15)


def test_open_sandboxes_still_reach_the_outside_and_egress_ones_do_not(cocoond, fleet, outside_host):
    assert greeting(cocoond, fleet["open1"], *outside_host) == "outside"
    assert greeting(cocoond, fleet["egress1"], *outside_host) == ""
