"""An OpenAPI 3.1 document generated from the method registry (JSON Schema 2020-12 fits as is)."""

from typing import Any

import cocoon
from cocoon.errors import HTTP_STATUS, ErrorCode
from cocoon.registry import registry
from cocoon.schema import ANY_OBJECT, STRING, obj

ERROR = obj(
    {"error": obj({"code": {"enum": list(ErrorCode)}, "message": STRING, "details": ANY_OBJECT})},
    required=("error",),
)


def _operation(method: Any) -> dict[str, Any]:
    error_ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    responses: dict[str, Any] = {
        "200": {
            "description": "The result.",
            "content": {"application/json": {"schema": obj({"result": method.result}, required=("result",))}},
        }
    }
    for status in sorted({str(status) for status in HTTP_STATUS.values()}):
        responses[status] = {"description": "An error.", **error_ref}
    return {
        "operationId": method.name.replace(".", "_"),
        "summary": method.description,
        "tags": [method.name.split(".")[0]],
        # An empty body means {}: a body is required exactly when {} would not do.
        "requestBody": {
            "required": not method.params_validator.is_valid({}),
            "content": {"application/json": {"schema": method.params}},
        },
        "responses": responses,
        "x-cocoon-admin": method.admin,
        "x-cocoon-agent-side": method.agent_side,
    }


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "cocoon", "version": cocoon.__version__},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": {
            f"/v1/rpc/{method.name}": {"post": _operation(method)}
            for method in registry.all()
            if not method.ws_only
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR},
        },
    }
