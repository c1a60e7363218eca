"""Open means the public internet, not the host and its LAN (issue #39, 1). From an open sandbox a plain
TCP connect reached a host service bound to 0.0.0.0 through every address of the host (its own bridge's
gateway, other sandboxes' gateways, docker0, the host's own address), a LAN address and the link-local
metadata address. The fence (egress.fence) refuses all of them and still lets the internet through:
here a namespace of the test's own at a public-looking address."""

import os
import socket
import socketserver
import subprocess
import sys
import threading

import pytest

from tests.conftest import fence_chain, free_port, wait_until
from tests.netns import namespace_host

pytestmark = pytest.mark.e2e

GREETING = b"reached"


def greeter(address: str, port: int) -> list[str]:
    """argv of a TCP server at address:port that greets every connection."""
    serve = (
        "import socketserver as s\n"
        f"class H(s.BaseRequestHandler):\n def handle(self): self.request.sendall({GREETING!r})\n"
        f"s.TCPServer(('{address}', {port}), H).serve_forever()"
    )
    return [sys.executable, "-c", serve]


class Greet(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(GREETING)


@pytest.fixture(scope="module")
def host_service():
    """A host service listening on every address (as Redis or PostgreSQL might): its port."""
    server = socketserver.ThreadingTCPServer(("0.0.0.0", free_port()), Greet)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def lan_host():
    """A 'LAN' machine in 10/8 (outside COCOON_SANDBOX_SUBNETS), reached through the host's routing."""
    subnet, port = f"10.77.{os.getpid() % 250}", 8081
    with namespace_host("lan", subnet, greeter(f"{subnet}.2", port), port) as address:
        yield address, port


@pytest.fixture(scope="module")
def metadata_host():
    """A cloud's metadata service: 169.254.169.254:80, in a namespace of its own."""
    with namespace_host("md", "169.254.169.252/30", greeter("169.254.169.254", 80), 80) as address:
        yield address, 80


@pytest.fixture(scope="module")
def opened(cocoond, sandbox_image):
    made = [cocoond.call("sandbox.create", {"network": "open", "image": sandbox_image}) for _ in range(2)]
    yield made
    for sandbox in made:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def fence_item(cocoond) -> dict:
    return {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}["openFence"]


def docker0_address() -> str:
    """docker0's address: 172.17.0.1 unless daemon.json's address pools placed it (scripts/provision)."""
    listed = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True)
    return listed.stdout.split()[3].split("/")[0]


def host_addresses() -> list[str]:
    """Every IPv4 address of the host but loopback: each bridge's, docker0's, its own."""
    listed = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True)
    found = [line.split()[3].split("/")[0] for line in listed.stdout.splitlines()]
    return [address for address in found if not address.startswith("127.")]


def greetings(cocoond, sandbox, targets: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """What each host:port first says to this sandbox ("" if it cannot connect), probed in one exec."""
    probe = "timeout 3 bash -c 'exec 3<>/dev/tcp/{0}/{1} && head -c 7 <&3' 2>/dev/null"
    probes = "; ".join(f"echo {host}:{port}=$({probe.format(host, port)})" for host, port in targets)
    result = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["bash", "-c", probes]})
    answers = dict(line.split("=", 1) for line in result["stdout"].splitlines())
    return {(host, port): answers[f"{host}:{port}"] for host, port in targets}


def reachable_from_the_host(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3) as connection:
            return connection.recv(7) == GREETING
    except OSError:
        return False


def test_an_open_sandbox_reaches_the_internet_but_not_the_host_its_lan_or_the_metadata_service(
    cocoond, opened, host_service, lan_host, metadata_host, outside_host
):
    wait_until(lambda: fence_item(cocoond)["ok"], timeout=60)
    first, second = opened
    refused = [(address, host_service) for address in host_addresses()] + [lan_host, metadata_host]
    # Its own bridge's gateway, the other sandbox's, docker0 and the host's own address are among them.
    gateways = {ip.rsplit(".", 1)[0] + ".1" for sandbox in opened for ip in sandbox["ips"].values()}
    assert gateways | {docker0_address()} <= {host for host, _ in refused}
    assert all(reachable_from_the_host(*target) for target in refused)  # each one answers, but not them

    probed = greetings(cocoond, first, [*refused, outside_host])
    assert {target: probed[target] for target in refused} == dict.fromkeys(refused, "")
    assert probed[outside_host] == "outside"  # open mode still works
    # No IPv6 either: the engine gives sandbox networks none, so nothing goes around the IPv4 fence.
    ipv6 = cocoond.call("sandbox.exec", {"sandboxId": second["id"], "command": ["cat", "/proc/net/if_inet6"]})
    assert ipv6["stdout"] == ""


def test_allowed_cidrs_are_reached_and_shown_as_a_warning_until_taken_back(
    cocoond, opened, lan_host, host_service
):
    wait_until(lambda: fence_item(cocoond)["ok"], timeout=60)
    sandbox = opened[0]
    [ip] = sandbox["ips"].values()
    gateway = ip.rsplit(".", 1)[0] + ".1"
    targets = [lan_host, (gateway, host_service)]
    allowed = [f"{lan_host[0]}/32", f"{gateway}/32"]
    cocoond.call("settings.update", {"sandbox": {"openAllowCidrs": allowed}})
    try:
        # settings.update answers once the fence holds the change.
        assert greetings(cocoond, sandbox, targets) == dict.fromkeys(targets, "reached")
        item = fence_item(cocoond)
        assert item["ok"] is True
        assert allowed[0] in item["detail"]
    finally:
        cocoond.call("settings.update", {"sandbox": {"openAllowCidrs": []}})
    assert greetings(cocoond, sandbox, targets) == dict.fromkeys(targets, "")
    assert "openAllowCidrs" not in fence_item(cocoond)["detail"]


def test_an_allowed_cidr_that_is_no_network_is_refused_with_its_field(cocoond):
    refused = cocoond.post("settings.update", {"sandbox": {"openAllowCidrs": ["10.0.5.1/24", "10.0.0.0/8"]}})
    assert refused.status_code == 400
    [bad] = refused.json()["error"]["details"]["fields"]
    assert (bad["path"], bad["code"]) == ("sandbox.openAllowCidrs.0", "invalid_cidr")
    assert cocoond.call("settings.get")["sandbox"]["openAllowCidrs"] == []


def test_the_fix_sets_the_fence_again_after_its_rules_were_taken_away(cocoond, opened, lan_host):
    wait_until(lambda: fence_item(cocoond)["ok"], timeout=60)
    jump = ["DOCKER-USER", "-j", fence_chain(cocoond.instance)]
    subprocess.run(["iptables", "-D", *jump], check=True)  # as a host's firewall reload would
    assert greetings(cocoond, opened[0], [lan_host]) == {lan_host: "reached"}
    # The checklist cannot see rules taken away behind cocoond's back (it knows what it last set), so
    # this is the checklist's fix called by hand, as after a host firewall reload.
    fenced = cocoond.call("egress.set_fence")
    assert [(row["node"], row["error"]) for row in fenced] == [("nd_local", None)]
    assert subprocess.run(["iptables", "-C", *jump]).returncode == 0
    assert greetings(cocoond, opened[0], [lan_host]) == {lan_host: ""}
