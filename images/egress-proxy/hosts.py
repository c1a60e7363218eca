"""Hosts in one canonical form, and the addresses that may be dialled for a sandbox."""

import ipaddress
import re
import socket

from base import Denied


def canonical_host(host: str) -> str:
    """Lower-case, no trailing dot, IDNA; IP literals in every spelling (127.1, 0x7f.0.0.1, 2130706433,
    [::ffff:127.0.0.1]) become their normal form."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.rstrip(".")
    ip = ip_literal(host)
    if ip is not None:
        return str(ip)
    try:
        encoded = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise Denied("invalid_host", 400) from None
    if not re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", encoded) or ".." in encoded:
        raise Denied("invalid_host", 400)
    return encoded


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:  # the forms inet_aton accepts: 127.1, 0x7f.1, 017700000001, 2130706433
            ip = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        return ip.ipv4_mapped
    return ip


# IPv6 addresses that stand for an IPv4 one: judged by that address. (A DNS64 resolver answers
# 64:ff9b::<public IPv4> for ordinary public hosts, so the well-known NAT64 prefix is not refused whole.)
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Refused whole: local-use NAT64 (RFC 8215), Teredo (the relay decides where it goes), the deprecated
# IPv4-compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d and site-local fec0::/10.
REFUSED_V6 = [
    ipaddress.IPv6Network(network)
    for network in ("64:ff9b:1::/48", "2001::/32", "::/96", "::ffff:0:0:0/96", "fec0::/10")
]


def public_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ip may be dialled for a sandbox: a global unicast address, also inside IPv6."""
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in REFUSED_V6):
            return False
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return public_address(embedded)
    return ip.is_global and not ip.is_multicast
