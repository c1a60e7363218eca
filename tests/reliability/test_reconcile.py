"""Reconcile never destroys what a row owns or is about to own (issue #14, 4): with clients creating
sandboxes while it ran, it removed a sandbox it had just created as an orphan."""

import pytest

from cocoon.actors import SYSTEM_ACTOR
from sandboxes import services
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.docker import DockerDriver

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_sandbox_created_while_reconcile_runs_is_not_taken_for_an_orphan(sandbox_image, monkeypatch):
    created = []
    engine_list = DockerDriver.list_ids

    def list_ids_while_a_create_completes(driver):
        # Another client's create lands (its row, then its engine objects) while reconcile works.
        created.append(services.create_sandbox(actor=SYSTEM_ACTOR, network="none", image=sandbox_image))
        return engine_list(driver)

    monkeypatch.setattr(DockerDriver, "list_ids", list_ids_while_a_create_completes)
    try:
        services.reconcile()
        monkeypatch.undo()
        [sandbox] = created
        assert get_driver().inspect(sandbox.id).state == SandboxState.RUNNING
    finally:
        monkeypatch.undo()
        for sandbox in created:
            services.delete_sandbox(sandbox.id, actor=SYSTEM_ACTOR)


def test_an_engine_object_no_row_owns_is_still_removed(sandbox_image):
    orphan = services.create_sandbox(actor=SYSTEM_ACTOR, network="none", image=sandbox_image)
    type(orphan).objects.filter(pk=orphan.pk).delete()  # the row is gone, its container is not
    services.reconcile()
    assert get_driver().inspect(orphan.id).state == SandboxState.MISSING
    assert orphan.id not in get_driver().list_ids()
