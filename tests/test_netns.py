"""The test hosts 'outside' the machine survive a killed earlier run (tests/netns.py)."""

import socket
import subprocess
import sys

from tests.netns import namespace_host


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_namespace_left_by_a_killed_run_does_not_take_the_route() -> None:
    # What a SIGKILLed run leaves: its namespace, a veth holding the subnet, and so a route to nowhere.
    subnet, pid = "198.18.251", _dead_pid()
    stale, host_side = f"cocoontest-stale-{pid}", f"ccsta{pid % 100000}"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        veth = ["ip", "link", "add", host_side, "type", "veth", "peer", "name", "eth0", "netns", stale]
        subprocess.run(veth, check=True)
        subprocess.run(["ip", "addr", "add", f"{subnet}.1/30", "dev", host_side], check=True)
        subprocess.run(["ip", "link", "set", host_side, "up"], check=True)
        serve = (
            "import socketserver as s\n"
            "class H(s.BaseRequestHandler):\n def handle(self): self.request.sendall(b'fresh')\n"
            f"s.TCPServer(('{subnet}.2', 9), H).serve_forever()"
        )
        with namespace_host("fresh", subnet, [sys.executable, "-c", serve], 9) as address:
            assert socket.create_connection((address, 9), timeout=5).recv(16) == b"fresh"
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert stale not in listed
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
