"""Reconcile never destroys what a row owns or is about to own (issue #14, 4): with clients creating
sandboxes while it ran, it removed a sandbox it had just created as an orphan."""

import pytest

from cocoon.actors import SYSTEM_ACTOR
from sandboxes import pools, services
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.docker import DockerDriver
from sandboxes.models import Sandbox
from sandboxes.reconcile import reconcile

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_sandbox_created_while_reconcile_runs_is_not_taken_for_an_orphan(sandbox_image, monkeypatch):
    created = []
    engine_list = DockerDriver.list_ids

    def list_ids_while_a_create_completes(driver):
        # Another client's create lands (its row, then its engine objects) while reconcile works.
        created.append(
            pools.create_sandbox(actor=SYSTEM_ACTOR, pool=False, network="none", image=sandbox_image).sandbox
        )
        return engine_list(driver)

    monkeypatch.setattr(DockerDriver, "list_ids", list_ids_while_a_create_completes)
    try:
        reconcile()
        monkeypatch.undo()
        [sandbox] = created
        assert get_driver().inspect(sandbox.id).state == SandboxState.RUNNING
    finally:
        monkeypatch.undo()
        for sandbox in created:
            services.delete_sandbox(sandbox.id, actor=SYSTEM_ACTOR)


def test_an_engine_object_no_row_owns_is_still_removed(sandbox_image):
    orphan = pools.create_sandbox(actor=SYSTEM_ACTOR, pool=False, network="none", image=sandbox_image).sandbox
    type(orphan).objects.filter(pk=orphan.pk).delete()  # the row is gone, its container is not
    reconcile()
    assert get_driver().inspect(orphan.id).state == SandboxState.MISSING
    assert orphan.id not in get_driver().list_ids()


def test_reconcile_never_removes_a_pool_member_a_create_claimed_while_it_looked(sandbox_image, monkeypatch):
    options = services.resolve_options(actor=SYSTEM_ACTOR, network="none", image=sandbox_image)
    member = services.make_sandbox(options, name=None, actor=None, pool="test-pool")
    get_driver().stop(member.id)  # a member the engine no longer runs: reconcile removes it...
    inspect = DockerDriver.inspect

    def inspect_while_a_create_claims_it(driver, sandbox_id):
        if sandbox_id == member.id:  # ...unless a create claimed it after reconcile read the rows
            Sandbox.objects.filter(pk=member.id).update(pool="", name="claimed")
        return inspect(driver, sandbox_id)

    monkeypatch.setattr(DockerDriver, "inspect", inspect_while_a_create_claims_it)
    try:
        reconcile()
        monkeypatch.undo()
        assert Sandbox.objects.get(pk=member.id).name == "claimed"  # the user's sandbox, still there
        assert get_driver().inspect(member.id).state == SandboxState.STOPPED
    finally:
        monkeypatch.undo()
        services.delete_sandbox(member.id, actor=SYSTEM_ACTOR)
