"""The method registry: declarations, authorization, validation, the catalogue."""

import pytest
from jsonschema.exceptions import ValidationError

from cocoon.actors import Actor
from cocoon.errors import CocoonError, ErrorCode, InvalidParams
from cocoon.registry import Registry, registry
from cocoon.schema import STRING, obj

ADMIN = Actor("tok_a", "admin", "admin")
AGENT = Actor("tok_b", "agent", "agent")


@pytest.fixture
def local() -> Registry:
    local = Registry()

    @local.method(
        "demo.echo", description="echo", params=obj({"text": STRING}, required=("text",)), result=STRING
    )
    def echo(call):
        return call.params["text"]

    @local.method("demo.secret", description="admin only", result=STRING, admin=True)
    def secret(call):
        return "s"

    @local.method("demo.broken", description="returns the wrong type", result=STRING)
    def broken(call):
        return 42

    return local


def test_it_dispatches_with_validated_params(local):
    assert local.dispatch("demo.echo", {"text": "hi"}, AGENT, "en") == "hi"


def test_it_rejects_an_agent_token_on_admin_methods(local):
    with pytest.raises(CocoonError) as error:
        local.dispatch("demo.secret", {}, AGENT, "en")
    assert error.value.code == ErrorCode.FORBIDDEN
    assert local.dispatch("demo.secret", None, ADMIN, "en") == "s"


def test_it_reports_every_field_error(local):
    with pytest.raises(CocoonError) as error:
        local.dispatch("demo.echo", {"txt": 1}, AGENT, "en")
    assert error.value.code == ErrorCode.INVALID_PARAMS
    assert {field["path"] for field in error.value.details["fields"]} == {"text", "txt"}


def test_it_checks_results_against_their_schema_in_tests(local):
    with pytest.raises(ValidationError):
        local.dispatch("demo.broken", {}, AGENT, "en")


def test_a_method_is_declared_once(local):
    with pytest.raises(ValueError, match="twice"):
        local.method("demo.echo", description="again", result=STRING)(lambda call: "")


def test_an_admin_method_can_never_be_agent_side(local):
    with pytest.raises(ValueError, match="agent_side"):
        local.method("demo.x", description="x", result=STRING, admin=True, agent_side=True)


def test_the_catalogue_hides_admin_methods_from_agent_tokens(local):
    assert [method.name for method in local.visible_to(AGENT)] == ["demo.broken", "demo.echo"]
    assert len(local.visible_to(ADMIN)) == 3


def test_the_core_methods_are_registered_with_their_flags():
    names = {method.name: method for method in registry.all()}
    for name in ("settings.update", "secrets.set", "tokens.create", "tokens.revoke", "activity.prune"):
        assert names[name].admin, name
    assert names["system.info"].agent_side
    assert names["events.subscribe"].ws_only
    assert all(method.description for method in names.values())


@pytest.mark.django_db
def test_a_whole_number_written_as_a_float_is_an_integer_to_the_handler():
    """JSON Schema lets 3.0 pass as an integer; a handler slicing with it failed with a 500 (the contract
    fuzzer found it in usage.records)."""
    from cocoon.actors import SYSTEM_ACTOR

    assert registry.dispatch("task.list", {"limit": 3.0}, SYSTEM_ACTOR, "en") == []
    assert registry.dispatch("usage.records", {"limit": 2.0}, SYSTEM_ACTOR, "en") == {
        "records": [],
        "next": None,
    }


def test_a_nullable_object_given_a_value_names_the_field_that_is_wrong():
    from cocoon.schema import BUDGET, compile_schema, nullable, obj, validate

    validator = compile_schema(obj({"budget": nullable(BUDGET)}))
    with pytest.raises(InvalidParams) as raised:
        validate(validator, {"budget": {"cost": 0, "tokens": "lots"}})
    fields = {field["path"]: field["message"] for field in raised.value.render()["details"]["fields"]}
    assert fields == {"budget.cost": "Must be more than 0.", "budget.tokens": "Must be of type integer."}
    validate(validator, {"budget": None})
