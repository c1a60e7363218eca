"""Engine objects carry their data directory's identity (issue #38, 2). A cocoond whose data directory was
lost (moved, restored onto a new disk, a second checkout with the default instance name) left its egress
proxy bound to a folder that no longer exists: the next cocoond took it for its own, and its one offered
fix, egress.start_proxy, failed on the missing bind source. And reconcile took the old sandboxes, with
their workspaces, for its own orphans and removed them."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cocoond, remove_instance_objects, server_env, wait_until

pytestmark = pytest.mark.e2e

DATA_LABEL = "io.cocoon.data"


def checklist(instance: Cocoond) -> dict[str, dict]:
    return {item["key"]: item for item in instance.call("system.setup_status")["items"]}


def cli(instance: Cocoond, *argv: str) -> subprocess.CompletedProcess:
    env = server_env(COCOON_URL=instance.url, COCOON_TOKEN=instance.token)
    command = [str(Path(sys.executable).parent / "cocoon"), "--json", *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def sandbox_containers(docker_client, instance: str) -> set[str]:
    """The ids of the instance's sandbox containers, pool members too."""
    filters = {"label": [f"io.cocoon.instance={instance}", "io.cocoon.kind=sandbox"]}
    return {
        each.labels["io.cocoon.sandbox"] for each in docker_client.containers.list(all=True, filters=filters)
    }


def test_a_new_data_directory_replaces_the_old_proxy_and_members_keeps_the_sandboxes_adopts_or_removes_them(
    tmp_path, sandbox_image, docker_client
):
    name = f"cocoontestdd{os.getpid()}"
    for each in ("x", "y"):
        (tmp_path / each).mkdir()
    old = Cocoond(data=tmp_path / "x" / "data", env={"COCOON_INSTANCE": name}).start()
    try:
        left = old.call("sandbox.create", {"network": "egress", "image": sandbox_image})
        assert old.call("egress.status")["running"]
        # A warm pool: one member claimed (someone's sandbox now), one waiting (no one's work).
        warm = {"network": "none", "image": sandbox_image}
        old.call("settings.update", {"sandbox": {"pools": [{"size": 1, **warm}], "poolCap": 1}})
        wait_until(lambda: old.call("system.info")["pool"]["ready"] == 1, timeout=60, interval=0.2)
        claimed = old.call("sandbox.create", {**warm, "name": "claimed"})
        old.call("files.write", {"sandboxId": claimed["id"], "path": "note.txt", "content": "mine"})
        wait_until(lambda: old.call("system.info")["pool"]["ready"] == 1, timeout=60, interval=0.2)
        waiting = sandbox_containers(docker_client, name) - {left["id"], claimed["id"]}
        assert len(waiting) == 1
        old_id = (old.data / "data-id").read_text().strip()
        proxy = docker_client.containers.get(f"{name}-egress-proxy")
        assert proxy.labels[DATA_LABEL] == old_id
        old.stop()
        shutil.rmtree(old.data.parent)

        new = Cocoond(data=tmp_path / "y" / "data", env={"COCOON_INSTANCE": name}).start()
        try:
            new_id = (new.data / "data-id").read_text().strip()
            assert new_id != old_id
            # The old sandbox holds someone's workspace: its start's reconcile kept it, and says so.
            container = docker_client.containers.get(f"{name}-{left['id']}")
            assert container.labels[DATA_LABEL] == old_id
            items = checklist(new)
            assert left["id"] in items["leftovers"]["detail"]
            assert "cocoon engine remove" in items["leftovers"]["detail"]
            listed = new.call("engine.foreign")
            assert listed == sorted(
                (
                    {"sandboxId": each, "node": "nd_local", "data": old_id}
                    for each in (left["id"], claimed["id"])
                ),
                key=lambda each: each["sandboxId"],
            )
            # The member nobody claimed held no one's work: it is gone, with its volumes.
            assert sandbox_containers(docker_client, name) == {left["id"], claimed["id"]}
            assert not docker_client.volumes.list(filters={"label": f"io.cocoon.sandbox={waiting.pop()}"})

            # The old proxy is no proxy of this data directory, and the fix the checklist names works.
            assert items["egressProxy"]["ok"] is False
            assert items["egressProxy"]["fix"] == "egress.start_proxy"
            new.call("egress.start_proxy")
            wait_until(lambda: checklist(new)["egressProxy"]["ok"], timeout=60)
            proxy = docker_client.containers.get(f"{name}-egress-proxy")
            assert proxy.labels[DATA_LABEL] == new_id
            ready = checklist(new)
            # Neither is set up in this test: the toolbox (COCOON_AUTO_INSTALL is off in the suite) and
            # a provider's key.
            assert {key for key, item in ready.items() if not item["ok"]} == {"toolbox", "providers"}

            # Adopted, the claimed member is this data directory's sandbox, workspace and all.
            adopted = cli(new, "engine", "adopt", claimed["id"], "--name", "kept")
            assert adopted.returncode == 0, adopted.stderr
            answer = json.loads(adopted.stdout)
            assert (answer["id"], answer["name"], answer["state"], answer["network"]) == (
                claimed["id"],
                "kept",
                "running",
                "none",
            )
            assert (answer["image"], answer["limits"]) == (claimed["image"], claimed["limits"])
            assert [each["id"] for each in new.call("sandbox.list")] == [claimed["id"]]
            read = new.call("files.read", {"sandboxId": claimed["id"], "path": "note.txt"})
            assert read["content"] == "mine"
            assert [each["sandboxId"] for each in new.call("engine.foreign")] == [left["id"]]
            again = cli(new, "engine", "adopt", claimed["id"])
            assert json.loads(again.stderr)["error"]["code"] == "not_found"

            removed = cli(new, "engine", "remove", left["id"])
            assert removed.returncode == 0, removed.stderr
            assert json.loads(removed.stdout) == {}
            assert docker_client.containers.list(all=True, filters={"name": f"{name}-{left['id']}"}) == []
            assert new.call("engine.foreign") == []
            assert left["id"] not in checklist(new)["leftovers"]["detail"]
            again = cli(new, "engine", "remove", left["id"])
            assert again.returncode == 4  # not_found
            assert json.loads(again.stderr)["error"]["code"] == "not_found"
        finally:
            new.stop()
    finally:
        old.stop()
        remove_instance_objects(docker_client, name)
