"""HTTP endpoints served by Django: health, the OpenAPI document, and DRF's errors as cocoon's (the RPC
itself is cocoon.httprpc)."""

import logging
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import cocoon
from cocoon.errors import CocoonError, ErrorCode, RpcError, unexpected_error
from cocoon.i18n import language_of_request
from cocoon.openapi import openapi_document

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


class OpenApiView(APIView):
    def get(self, request: Request) -> Response:
        return Response(openapi_document())


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok", "version": cocoon.__version__})


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    with translation.override(language_of_request(request)):
        error = RpcError(ErrorCode.NOT_FOUND, _("No such endpoint."))
        return JsonResponse({"error": error.render()}, status=404)
