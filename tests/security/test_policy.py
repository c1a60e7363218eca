"""The egress policy: the proxy's address check refuses every IPv6 class that leads to a private IPv4
address, and a published policy is never staler than its version says."""

import threading

import pytest
from django.db import connections

from cocoon import config
from cocoon.actors import SYSTEM_ACTOR
from egress import policy
from sandboxes.models import LOCAL_NODE
from tests.egress_proxy import rules as proxy

REFUSED = {
    "NAT64 of a private address": "64:ff9b::10.0.0.1",
    "NAT64 of loopback": "64:ff9b::127.0.0.1",
    "NAT64 of the metadata service": "64:ff9b::169.254.169.254",
    "local-use NAT64, even of a public address": "64:ff9b:1::8.8.8.8",
    "6to4 of a private address": "2002:a00:1::1",
    "6to4 of loopback": "2002:7f00:1::1",
    "IPv4-compatible private": "::10.0.0.1",
    "IPv4-compatible loopback": "::127.0.0.1",
    "IPv4-compatible, even public": "::8.8.8.8",
    "IPv4-mapped private": "::ffff:192.168.1.1",
    "IPv4-translated": "::ffff:0:10.0.0.1",
    "Teredo": "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "Teredo of a private client": "2001:0:a00:1::f5ff:fffe",
    "site-local": "fec0::1",
    "site-local, upper end": "feff:ffff::1",
    "unique local": "fd00::1",
    "link-local": "fe80::1",
    "loopback": "::1",
    "multicast": "ff0e::1",
    "private IPv4": "10.1.2.3",
}
PUBLIC = {
    "public IPv6": "2606:4700:4700::1111",
    "NAT64 of a public address (DNS64)": "64:ff9b::8.8.8.8",
    "6to4 of a public address": "2002:808:808::1",
    "public IPv4": "8.8.8.8",
}


def dialled(monkeypatch, address: str) -> str:
    """What the proxy would dial for a name its policy says resolves to address (a sandbox's CONNECT
    to an allowed name goes through this very check)."""
    monkeypatch.setattr(proxy, "policy", proxy.Policy({"hosts": {"target.invalid": address}}))
    return proxy.resolve("target.invalid", 443, public_only=True)


@pytest.mark.parametrize("name", REFUSED)
def test_the_proxy_refuses_an_address_that_leads_to_a_private_one(monkeypatch, name):
    with pytest.raises(proxy.Denied) as denied:
        dialled(monkeypatch, REFUSED[name])
    assert denied.value.reason == "private_address"


@pytest.mark.parametrize("name", PUBLIC)
def test_the_proxy_accepts_a_public_address(monkeypatch, name):
    assert dialled(monkeypatch, PUBLIC[name]) == PUBLIC[name]


@pytest.mark.django_db(transaction=True)
def test_a_publish_never_writes_a_document_staler_than_one_written_before(monkeypatch):
    """A publisher that read the settings before another one changed them and published may not
    write afterwards: the final policy.json holds the final settings."""
    reading = threading.Event()
    other_done = threading.Event()
    original = config.get_settings

    def slow_read():
        document = original()
        if threading.current_thread().name == "stale":
            reading.set()
            # The other publisher runs now; it can finish only if this one holds no lock yet.
            other_done.wait(timeout=3)
        return document

    config.update_settings({"egress": {"allowlist": ["before.invalid"]}}, actor=SYSTEM_ACTOR)
    monkeypatch.setattr(policy.config, "get_settings", slow_read)

    def other() -> None:
        try:
            config.update_settings({"egress": {"allowlist": ["after.invalid"]}}, actor=SYSTEM_ACTOR)
            policy.publish()
            other_done.set()
        finally:
            connections.close_all()

    def publish() -> None:
        try:
            policy.publish()
        finally:
            connections.close_all()

    stale = threading.Thread(target=publish, name="stale")
    stale.start()
    assert reading.wait(timeout=10)
    publisher = threading.Thread(target=other)
    publisher.start()
    stale.join(timeout=30)
    publisher.join(timeout=30)
    assert not stale.is_alive()
    assert not publisher.is_alive()
    assert other_done.is_set()
    final = policy.current()
    assert "after.invalid" in final["allowlist"]
    assert "before.invalid" not in final["allowlist"]
    assert {key: value for key, value in final.items() if key != "version"} == policy.build_all()[LOCAL_NODE]
