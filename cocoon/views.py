"""HTTP endpoints: RPC, health, OpenAPI. Thin: parse, call the registry, answer JSON."""

import json
import logging
from typing import Any, cast

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import cocoon
from cocoon.actors import Actor
from cocoon.errors import CocoonError, ErrorCode, RpcError, unexpected_error
from cocoon.i18n import language_of_request
from cocoon.openapi import openapi_document
from cocoon.registry import PARAMS_NOT_OBJECT, registry

logger = logging.getLogger(__name__)

DRF_ERRORS = {
    exceptions.NotAuthenticated: ErrorCode.UNAUTHORIZED,
    exceptions.AuthenticationFailed: ErrorCode.UNAUTHORIZED,
    exceptions.PermissionDenied: ErrorCode.FORBIDDEN,
    exceptions.MethodNotAllowed: ErrorCode.METHOD_NOT_ALLOWED,
    exceptions.ParseError: ErrorCode.INVALID_JSON,
    exceptions.NotFound: ErrorCode.NOT_FOUND,
}


def error_response(error: CocoonError, request: Any) -> Response:
    with translation.override(language_of_request(request)):
        body = {"error": error.render()}
    return Response(body, status=error.http_status, headers=error.http_headers)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """Every failure, whatever raised it, leaves as {"error": {"code", "message", "details"}}."""
    request = context["request"]
    error: CocoonError
    if isinstance(exc, CocoonError):
        error = exc
    elif type(exc) in DRF_ERRORS:
        error = RpcError(DRF_ERRORS[type(exc)])
    else:
        logger.exception("unhandled error in %s", request.path)
        error = unexpected_error(exc)
    return error_response(error, request)


def parse_params(body: bytes) -> dict[str, Any]:
    """Params are the whole body as a JSON object, whatever the Content-Type claims (curl -d sends a form
    type). An empty body means no params; any other JSON value (null, a list, a string) is refused."""
    if not body.strip():
        return {}
    try:
        params = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        details = (
            {"line": error.lineno, "column": error.colno} if isinstance(error, json.JSONDecodeError) else {}
        )
        raise RpcError(ErrorCode.INVALID_JSON, details=details) from None
    if not isinstance(params, dict):
        raise RpcError(ErrorCode.INVALID_REQUEST, PARAMS_NOT_OBJECT)
    return params


class RpcView(APIView):
    """POST /v1/rpc/<method>  body = params  ->  {"result": ...} | {"error": {...}}"""

    def post(self, request: Request, method: str) -> Response:
        try:
            body = request.body
        except RequestDataTooBig:
            raise RpcError(ErrorCode.INVALID_REQUEST, _("The request body is too large.")) from None
        params = parse_params(body)
        # TokenAuthentication's user is an Actor, and IsAuthenticated lets no request through without one.
        actor = cast(Actor, request.user)
        result = registry.dispatch(method, params, actor, lambda: language_of_request(request))
        return Response({"result": result})


class OpenApiView(APIView):
    def get(self, request: Request) -> Response:
        return Response(openapi_document())


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok", "version": cocoon.__version__})


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    with translation.override(language_of_request(request)):
        error = RpcError(ErrorCode.NOT_FOUND, _("No such endpoint."))
        return JsonResponse({"error": error.render()}, status=404)
