"""A host of our own 'outside' the machine: a network namespace behind a veth pair, reached from
containers exactly like a host on the internet, and routed only to that veth."""

import ipaddress
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _ip(*args: str, check: bool = True) -> str:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True).stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def remove_stale_namespaces() -> list[str]:
    """Delete the namespaces of test runs that were killed before their cleanup ran (named after
    their pid, which no longer lives): their veth kept our subnet's route and took its traffic."""
    stale = []
    for line in _ip("netns", "list").splitlines():
        found = re.fullmatch(r"(cocoontest-\w+-(\d+))(?: \(id: \d+\))?", line.strip())
        if found and not _alive(int(found[2])):
            # The veth first: a deleted namespace frees its links only later, in the background.
            _ip("-n", found[1], "link", "del", "eth0", check=False)
            _ip("netns", "del", found[1], check=False)
            stale.append(found[1])
    return stale


def host_link(name: str) -> str:
    """The host's end of the veth of namespace_host(name): down, the host is cut off."""
    return f"cc{name[:3]}{os.getpid() % 100000}"


def namespace_of(name: str) -> str:
    return f"cocoontest-{name}-{os.getpid()}"


@contextmanager
def namespace_host(name: str, subnet: str, serve: list[str], port: int) -> Iterator[str]:
    """Run serve (argv) inside a fresh namespace at <subnet>.2 (a /30; the host side is .1), or at the
    second address of subnet when it is a /30 itself ("169.254.169.252/30": .254), and yield that
    address once port answers; everything is removed afterwards."""
    namespace, host_side = namespace_of(name), host_link(name)
    network = ipaddress.IPv4Network(subnet if "/" in subnet else f"{subnet}.0/30")
    gateway, address = (str(each) for each in network.hosts())
    remove_stale_namespaces()
    taken = _ip("-4", "-o", "addr", "show", "to", str(network))
    assert not taken, f"{network} is already in use by another live test run: {taken}"
    _ip("netns", "add", namespace)
    server = None
    try:
        _ip("link", "add", host_side, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("addr", "add", f"{gateway}/30", "dev", host_side)
        _ip("link", "set", host_side, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/30", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "route", "add", "default", "via", gateway)
        server = subprocess.Popen(["ip", "netns", "exec", namespace, *serve])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield address
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        _ip("link", "del", host_side, check=False)
        _ip("netns", "del", namespace, check=False)


@contextmanager
def routed(link: str) -> Iterator[None]:
    """Let the host forward what comes in and goes out over link, as routers between hosts do (Docker
    drops forwarded traffic it did not set up): a node's containers reach the stand-in for the
    internet as they would from another machine."""
    rules = [["-i", link, "-j", "ACCEPT"], ["-o", link, "-j", "ACCEPT"]]
    for rule in rules:
        subprocess.run(["iptables", "-I", "DOCKER-USER", *rule], check=True)
    try:
        yield
    finally:
        for rule in rules:
            subprocess.run(["iptables", "-D", "DOCKER-USER", *rule], check=False)
