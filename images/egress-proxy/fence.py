"""The fence of open sandboxes, set by cocoon's egress.fence in a one-shot helper container that shares the
host's network namespace and holds NET_ADMIN alone: a sandbox network reaches the public internet, never
the host itself nor a private, link-local, loopback or multicast address (unless allowed).

argv[1] is JSON {"chain": name, "sources": [CIDR], "allow": [CIDR], "block": [CIDR], "nameservers": [IP]}
(IPv4: the engines give sandboxes no IPv6). Idempotent: the chains are emptied and filled again, and
jumped to once, from DOCKER-USER (Docker's place for them) or else FORWARD (Podman), and INPUT. The
name servers stay reachable on port 53: the engine's resolver asks them from
inside the sandbox's namespace, and a cloud's or a LAN's resolver is often at a private address.
Prints {"hook": the chain jumped from} as JSON."""

import json
import subprocess
import sys

REJECT = ["-j", "REJECT", "--reject-with", "icmp-admin-prohibited"]  # fails at once, as "no route"
ANSWERS = ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"]


def iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True, check=check)


def exists(*args: str) -> bool:
    return iptables(*args, check=False).returncode == 0


def rules(spec: dict) -> tuple[list[list[str]], list[list[str]]]:
    """What the forward chain and the input chain hold."""
    forward, inbound = [], []
    for source in spec["sources"]:
        forward += [["-s", source, *ANSWERS], ["-s", source, "-d", source, "-j", "RETURN"]]
        inbound.append(["-s", source, *ANSWERS])
        for server in spec["nameservers"]:
            for protocol in ("udp", "tcp"):
                lookup = ["-s", source, "-d", server, "-p", protocol, "--dport", "53", "-j", "RETURN"]
                forward.append(lookup)
                inbound.append(lookup)
        for allowed in spec["allow"]:
            forward.append(["-s", source, "-d", allowed, "-j", "RETURN"])
            inbound.append(["-s", source, "-d", allowed, "-j", "RETURN"])
        forward += [["-s", source, "-d", blocked, *REJECT] for blocked in spec["block"]]
        # Every address of the host, on any bridge; not the host's own connections to them (over lo).
        inbound.append(["!", "-i", "lo", "-s", source, *REJECT])
    return forward, inbound


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    chain, inbound_chain = spec["chain"], spec["chain"] + "-IN"
    hook = "DOCKER-USER" if exists("-S", "DOCKER-USER") else "FORWARD"
    jumps = [(hook, chain), ("INPUT", inbound_chain)]
    for (parent, child), held in zip(jumps, rules(spec), strict=True):
        if not exists("-S", child):
            iptables("-N", child)
        iptables("-F", child)
        for rule in held:
            iptables("-A", child, *rule)
        if not exists("-C", parent, "-j", child):
            iptables("-I", parent, "1", "-j", child)
    print(json.dumps({"hook": hook}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
