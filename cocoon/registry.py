"""The one method registry (SPEC §2.1).

A method is declared once, with @registry.method(...) in an app's methods.py. The declaration drives
HTTP RPC, WebSocket RPC, system.methods, /v1/openapi.json and later the MCP tools and the CLI.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from jsonschema import Draft202012Validator

from cocoon.actors import Actor
from cocoon.errors import CocoonError, ErrorCode, RpcError
from cocoon.schema import EMPTY, Schema, compile_schema, integral, validate

Language = str | Callable[[], str]


class Call:
    """What a handler gets: validated params, who is calling, and in which language to answer.

    The language may be given as a function: it is looked up only if a handler asks for it.
    """

    def __init__(
        self, params: dict[str, Any], actor: Actor, language: Language, connection: Any = None
    ) -> None:
        self.params = params
        self.actor = actor
        self.connection = connection  # the WebSocket consumer, for methods that need one (events.*)
        self._language = language
        self.checked: dict[str, Any] = {}  # the rows owner checks loaded, by param (Call.row)

    def row(self, param: str, load: Callable[[Any], Any]) -> Any:
        """The object params[param] names: the row its owner check loaded already, else load(value)."""
        if param in self.checked:
            return self.checked[param]
        return load(self.params[param])

    @property
    def language(self) -> str:
        if callable(self._language):
            self._language = self._language()
        return self._language


Handler = Callable[[Call], Any]
# Raises not_found when the actor may not see the object a param names (cocoon.tenancy); what it returns
# (the row it loaded, or None) the handler gets as Call.row's, not loading it again.
OwnerCheck = Callable[[Actor, Any], object]


@dataclass(frozen=True)
class Method:
    name: str
    description: str
    params: Schema
    result: Schema
    handler: Handler
    admin: bool = False  # settings, secrets, tokens, images, providers, egress policy
    agent_side: bool = False  # safe for a controlling agent (exposed over MCP)
    ws_only: bool = False  # needs a WebSocket connection (events.subscribe)
    reads: bool = False  # changes nothing: a viewer may call it
    params_validator: Draft202012Validator = field(repr=False, compare=False, default=None)
    result_validator: Draft202012Validator = field(repr=False, compare=False, default=None)

    def allowed_for(self, actor: Actor) -> bool:
        return actor.is_admin or (not self.admin and (self.reads or not actor.read_only))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "params": self.params,
            "result": self.result,
            "admin": self.admin,
            "agentSide": self.agent_side,
            "wsOnly": self.ws_only,
            "reads": self.reads,
        }


UNKNOWN_METHOD = _("Unknown method %(name)s.")
ADMIN_ONLY = _("%(name)s needs an admin token.")
VIEWER = _("%(name)s changes something, and a viewer only reads.")
WS_ONLY = _("%(name)s is only available over the WebSocket /v1/ws.")
PARAMS_NOT_OBJECT = _("Params must be a JSON object.")


class Registry:
    def __init__(self) -> None:
        self._methods: dict[str, Method] = {}
        self._translations: list[tuple[tuple[type[Exception], ...], Callable[[Exception], CocoonError]]] = []
        self._owned: dict[str, OwnerCheck] = {}

    def owned(self, param: str, check: OwnerCheck) -> None:
        """A param of this name, in any method, names an object that has an owner: before a handler runs,
        check(actor, value) answers not_found, as for a missing one, unless the actor may see it. The
        one place every transport's calls pass (HTTP, WebSocket, MCP, the UI's)."""
        if param in self._owned:
            raise ValueError(f"param {param} has an owner check already")
        self._owned[param] = check

    def translate(self, *types: type[Exception], into: Callable[[Exception], CocoonError]) -> None:
        """Errors of a lower layer's library (the engine's client: the engine went away) that escape a
        service become the given CocoonError where calls end, never an internal error."""
        self._translations.append((types, into))

    def method(
        self,
        name: str,
        *,
        description: str,
        params: Schema = EMPTY,
        result: Schema,
        admin: bool = False,
        agent_side: bool = False,
        ws_only: bool = False,
        reads: bool = False,
    ) -> Callable[[Handler], Handler]:
        if admin and agent_side:
            raise ValueError(f"{name}: an admin method can never be agent_side")

        def register(handler: Handler) -> Handler:
            if name in self._methods:
                raise ValueError(f"method {name} is declared twice")
            self._methods[name] = Method(
                name=name,
                description=description,
                params=params,
                result=result,
                handler=handler,
                admin=admin,
                agent_side=agent_side,
                ws_only=ws_only,
                reads=reads,
                params_validator=compile_schema(params),
                result_validator=compile_schema(result),
            )
            return handler

        return register

    def all(self) -> list[Method]:
        return sorted(self._methods.values(), key=lambda method: method.name)

    def visible_to(self, actor: Actor) -> list[Method]:
        return [method for method in self.all() if method.allowed_for(actor)]

    def find(self, name: str) -> Method | None:
        return self._methods.get(name)

    def get(self, name: str) -> Method:
        method = self._methods.get(name)
        if method is None:
            raise RpcError(ErrorCode.NOT_FOUND, UNKNOWN_METHOD, name=name)
        return method

    def dispatch(
        self, name: str, params: Any, actor: Actor, language: Language, connection: Any = None
    ) -> Any:
        """Authorize, validate and run one call. Raises a CocoonError for anything that cannot be done."""
        method = self.get(name)
        if not method.allowed_for(actor):
            raise RpcError(ErrorCode.FORBIDDEN, ADMIN_ONLY if method.admin else VIEWER, name=name)
        if method.ws_only and connection is None:
            raise RpcError(ErrorCode.INVALID_REQUEST, WS_ONLY, name=name)
        if params is None:  # no params at all (an empty body, a frame without "params"): none given
            params = {}
        if not isinstance(params, dict):
            raise RpcError(ErrorCode.INVALID_REQUEST, PARAMS_NOT_OBJECT)
        validate(method.params_validator, params)
        params = integral(method.params, params)
        # events.* run in the event loop, where nothing may wait for the database: what a subscription
        # naming someone else's sandbox hears is filtered as it is sent (events.may_hear), so it hears
        # nothing, exactly as one naming a missing sandbox.
        call = Call(params=params, actor=actor, language=language, connection=connection)
        if not actor.sees_everything and not method.ws_only:
            for param, check in self._owned.items():
                if (value := params.get(param)) is not None and (row := check(actor, value)) is not None:
                    call.checked[param] = row
        try:
            result = method.handler(call)
        except CocoonError:
            raise
        except Exception as error:
            for types, into in self._translations:
                if isinstance(error, types):
                    raise into(error) from error
            raise
        if settings.COCOON_VALIDATE_RESULTS:
            method.result_validator.validate(result)
        return result


registry = Registry()
