"""Warm pools (sandboxes.pools): matching without an engine, then claim, refill, fallback, image change,
restart and isolation on the real Docker engine through a live cocoond."""

import io
import secrets
import threading
import time
from datetime import UTC, datetime

import pytest
from django.utils import translation

from cocoon import config, settings_checks, settings_defaults
from cocoon.errors import InvalidParams
from sandboxes import pools, services
from tests.conftest import Cocoond, remove_instance_objects, wait_until

# -- matching and settings, no engine ------------------------------------------------------------------


def _document(*templates):
    return config.deep_merge(settings_defaults.DEFAULTS, {"sandbox": {"pools": list(templates)}})


def test_a_request_matches_only_the_pool_of_exactly_its_options():
    document = _document({"size": 2, "network": "none", "limits": {"pids": 256}}, {"size": 0})
    defaults = document["sandbox"]

    def key(**options):
        return pools.match(services.options_from(defaults, **options), document).get("local")

    warm = key(network="none", limits={"pids": 256})
    assert warm is not None
    # The defaults fill in what the request leaves out, on both sides.
    assert key(network="none", limits={"pids": 256, "cpus": 2}, image=defaults["image"]) == warm
    assert key(network="none") is None  # other limits
    assert key(network="none", limits={"pids": 256}, repo="https://example.com/r.git") is None
    assert key(network="egress", limits={"pids": 256}) is None
    assert key() is None  # the defaults' pool has size 0: nothing to claim
    assert key(network="none", limits={"pids": 256}, runtime="runsc") is None


def test_a_setting_a_create_reads_is_part_of_the_pool_and_alike_templates_add_up():
    document = _document({"size": 1, "network": "none"})
    options = services.options_from(document["sandbox"], network="none")
    before = pools.match(options, document)["local"]
    # Members made with a writable root are no members of the pool once read-only roots are on.
    hardened = config.deep_merge(document, {"sandbox": {"readOnlyRoot": True}})
    hardened_options = services.options_from(hardened["sandbox"], network="none")  # as a create reads it
    assert pools.match(hardened_options, hardened).get("local") not in {None, before}
    # Templates that come out the same (1 and 1.0 CPUs) are one pool of both sizes, none dropped.
    alike = _document({"size": 1, "limits": {"cpus": 1}}, {"size": 2, "limits": {"cpus": 1.0}})
    assert [pool.size for pool in pools.configured_pools(alike).values()] == [3]


def test_a_template_kept_on_several_nodes_is_a_pool_per_node():
    document = _document({"size": 1, "network": "none"}, {"size": 2, "network": "none", "node": "na"})
    settings_checks.validate_document(document)  # the same options on another node are no duplicate
    options = services.options_from(document["sandbox"], network="none")
    keys = pools.match(options, document)
    assert set(keys) == {"local", "na"}
    assert keys["local"] != keys["na"]
    assert {pool.node: pool.size for pool in pools.configured_pools(document).values()} == {
        "local": 1,
        "na": 2,
    }


def test_bad_pool_settings_are_refused_with_a_stable_code_and_a_translated_message():
    duplicate = _document({"size": 1}, {"size": 2, "network": "egress", "image": "cocoon-sandbox:latest"})
    with pytest.raises(InvalidParams) as refused:
        settings_checks.validate_document(duplicate)
    (error,) = refused.value.details["fields"]
    assert (error["path"], error["code"]) == ("sandbox.pools.1", "duplicate_pool")
    with translation.override("de"):
        assert str(error["message"]) == "Hat dieselben Optionen wie Pool 0."

    too_big = _document({"size": 1, "limits": {"cpus": 64}})
    with pytest.raises(InvalidParams) as refused:
        settings_checks.validate_document(too_big)
    assert [(f["path"], f["code"]) for f in refused.value.details["fields"]] == [
        ("sandbox.pools.0.limits.cpus", "maximum")
    ]
    with pytest.raises(InvalidParams) as refused:
        settings_checks.validate_document(_document({"size": 51, "colour": "red"}))
    assert {f["path"] for f in refused.value.details["fields"]} >= {"sandbox.pools.0.size"}


# -- a live cocoond with a pool --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool_image(docker_client, sandbox_image):
    """A tag of the pools' own, so a test can rebuild it without touching anyone else's image."""
    tag = f"cocoon-sandbox:pool-{secrets.token_hex(4)}"
    docker_client.images.get(sandbox_image).tag(*tag.split(":"))
    yield tag
    docker_client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def pooled(tmp_path_factory, docker_client, pool_image):
    instance = Cocoond(data=tmp_path_factory.mktemp("pools") / "data").start()
    instance.docker = docker_client
    yield instance
    instance.stop()
    remove_instance_objects(docker_client, instance.instance)


@pytest.fixture
def pool_of(pooled, pool_image):
    """Configure the one pool (network none, the pools' image) at a size; created sandboxes go after."""
    created = []
    warm = {"network": "none", "image": pool_image}

    def configure(size, cap=4):
        pooled.call("settings.update", {"sandbox": {"pools": [{"size": size, **warm}], "poolCap": cap}})
        return ready(pooled, min(size, cap))

    def create(**params):
        answer = pooled.call("sandbox.create", {**warm, **params})
        created.append(answer["id"])
        return answer

    configure.create = create
    yield configure
    for sandbox_id in created:
        pooled.post("sandbox.delete", {"sandboxId": sandbox_id})


def ready(instance, size):
    """Wait for exactly size members, all started; answers the members' sandbox ids."""

    def settled():
        count = instance.call("system.info")["pool"]
        return count["ready"] == size and count["starting"] == 0

    wait_until(settled, timeout=60, interval=0.2)
    return members(instance)


def members(instance):
    """The instance's sandbox containers that sandbox.list does not show (its pool members): id -> image."""
    containers = instance.docker.containers.list(
        filters={"label": [f"io.cocoon.instance={instance.instance}", "io.cocoon.kind=sandbox"]}
    )
    engine = {container.labels["io.cocoon.sandbox"]: container.image.id for container in containers}
    listed = {sandbox["id"] for sandbox in instance.call("sandbox.list")}
    return {sandbox_id: image for sandbox_id, image in engine.items() if sandbox_id not in listed}


FINGERPRINT = r"""
cd /workspace
echo "files: $(ls -A /workspace /tmp /home/agent /opt/cocoon/status 2>&1 | tr '\n' ' ')"
echo "git: [$(git status --porcelain)] $(git rev-parse HEAD cocoon-baseline | tr '\n' ' ')"
echo "commits: $(git log --oneline | wc -l)"
echo "stash: $(git stash list | wc -l) reflog: $(git reflog | wc -l)"
processes=$(ps -eo user=,comm=)  # alone: a pipeline's fork not yet exec'd would show as a second bash
echo "processes: $(sort <<<"$processes" | tr '\n' ' ')"
echo "env: $(env | sort | tr '\n' ' ')"
echo "hostname: $(hostname)"
"""


def fingerprint(instance, sandbox_id):
    result = instance.call("sandbox.exec", {"sandboxId": sandbox_id, "command": ["bash", "-c", FINGERPRINT]})
    assert result["exitCode"] == 0, result
    return result["stdout"].replace(sandbox_id, "ID").replace(sandbox_id.replace("_", "-"), "ID")


def test_a_claimed_sandbox_is_indistinguishable_from_a_fresh_one_and_the_pool_refills(pooled, pool_of):
    (member,) = pool_of(1)
    # Invisible and out of reach while it waits.
    assert member not in {sandbox["id"] for sandbox in pooled.call("sandbox.list")}
    reached = pooled.post("sandbox.exec", {"sandboxId": member, "command": ["touch", "/workspace/x"]})
    assert reached.json()["error"]["code"] == "not_found"
    assert pooled.call("system.info")["pool"] == {"ready": 1, "starting": 0}

    before = datetime.now(UTC)
    claimed = pool_of.create(name="warm-one", budget={"cost": 5})
    assert (claimed["id"], claimed["name"], claimed["fromPool"], claimed["state"], claimed["budget"]) == (
        member,
        "warm-one",
        True,
        "running",
        {"cost": 5},
    )
    assert datetime.fromisoformat(claimed["createdAt"]) >= before.replace(microsecond=0)
    assert claimed["id"] in {sandbox["id"] for sandbox in pooled.call("sandbox.list")}
    assert pooled.call("sandbox.diff", {"sandboxId": member}) == {"patch": "", "files": []}

    cold = pool_of.create(pool=False, budget={"tokens": 1000})
    assert (cold["fromPool"], cold["budget"]) == (False, {"tokens": 1000})
    assert fingerprint(pooled, member) == fingerprint(pooled, cold["id"])

    # Refilled: a new member, not the claimed one.
    (refill,) = ready(pooled, 1)
    assert refill != member


def test_a_create_falls_back_to_a_cold_one(pooled, pool_of):
    (member,) = pool_of(1)
    assert pool_of.create(limits={"pids": 512})["fromPool"] is False  # other options
    assert pool_of.create(pool=False)["fromPool"] is False
    assert set(members(pooled)) == {member}  # neither touched the pool
    assert pool_of.create()["id"] == member
    # The refill it kicked takes a create's time: meanwhile the pool is empty.
    emptied = pool_of.create()
    assert emptied["fromPool"] is False
    ready(pooled, 1)


def test_concurrent_creates_never_share_a_member(pooled, pool_of):
    waiting = set(pool_of(2))
    answers, failures = [], []

    def create():
        try:
            answers.append(pool_of.create())
        except Exception as error:
            failures.append(error)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    ids = [answer["id"] for answer in answers]
    assert len(set(ids)) == 4
    # Both waiting members were claimed, each once; the others came cold (or from the refill).
    assert waiting <= {answer["id"] for answer in answers if answer["fromPool"]}
    assert all(answer["state"] == "running" for answer in answers)
    ready(pooled, 2)


def test_a_rebuilt_image_replaces_the_members_and_a_shrunk_pool_loses_them(
    pooled, pool_of, pool_image, docker_client
):
    old = pool_of(1)
    rebuilt, _ = docker_client.images.build(
        fileobj=io.BytesIO(f"FROM {pool_image}\nLABEL pooltest={secrets.token_hex(4)}\n".encode()),
        tag=pool_image,
        rm=True,
    )

    # The beat notices within seconds; the old member goes and a new one of the new image comes.
    def replaced():
        now = members(pooled)
        return set(now.values()) == {rebuilt.id} and not set(now) & set(old) and now

    assert len(wait_until(replaced, timeout=60, interval=0.5)) == 1
    # The cap bounds the pools: a refill one beat later has still made no third member.
    assert len(pool_of(3, cap=2)) == 2
    time.sleep(6)
    assert pooled.call("system.info")["pool"] == {"ready": 2, "starting": 0}
    pool_of(0)
    wait_until(lambda: not members(pooled), timeout=30, interval=0.5)


def test_a_lowered_cap_removes_members_and_a_failing_template_holds_up_no_other(pooled, pool_of, pool_image):
    assert len(pool_of(2)) == 2
    pool_of(2, cap=1)  # waits for exactly one
    # A template whose members cannot be made (its repo cannot be cloned without a network) comes first.
    broken = {"size": 1, "network": "none", "image": pool_image, "repo": "https://nowhere.invalid/r.git"}
    working = {"size": 1, "network": "none", "image": pool_image}
    pooled.call("settings.update", {"sandbox": {"pools": [broken, working], "poolCap": 4}})
    assert len(ready(pooled, 1)) == 1
    pool_of(0)
    wait_until(lambda: not members(pooled), timeout=30, interval=0.5)


def test_a_pool_outlives_a_cocoond_restart_and_is_claimed_after_it(pooled, pool_of):
    (member,) = pool_of(1)
    pooled.restart()
    assert set(ready(pooled, 1)) == {member}
    claimed = pool_of.create()
    assert (claimed["id"], claimed["fromPool"]) == (member, True)
    ready(pooled, 1)
