"""An engine restart must not cost every agent (issue #14, 6): the setup checklist says whether Docker's
live-restore keeps sandboxes running through a dockerd restart, and scripts/provision turns it on for the
dockerd it manages."""


def test_the_checklist_says_whether_sandboxes_survive_a_dockerd_restart(cocoond, docker_client):
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    live_restore = docker_client.info()["LiveRestoreEnabled"]
    assert items["liveRestore"]["ok"] is live_restore
    assert ("On:" if live_restore else "live-restore") in items["liveRestore"]["detail"]


def test_provision_turned_live_restore_on_for_its_dockerd(docker_client):
    assert docker_client.info()["LiveRestoreEnabled"] is True
