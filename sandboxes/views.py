"""GET /v1/sandboxes/<id>/archive?path= — a tar stream, never buffered whole in cocoond."""

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from sandboxes import files

_END = object()


async def _stream(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Pull the engine's synchronous stream one chunk at a time in a thread: handing Django a sync
    iterator under ASGI would make it read the whole archive into memory first."""
    # The stub's ParamSpec keeps only next()'s first overload, the one without a default.
    next_chunk = sync_to_async(next, thread_sensitive=False)
    while (chunk := await next_chunk(chunks, _END)) is not _END:  # type: ignore[call-arg]
        yield chunk


class ArchiveView(APIView):
    def get(self, request: Request, sandbox_id: str) -> StreamingHttpResponse:
        path = request.query_params.get("path", "/workspace")
        chunks = files.archive(sandbox_id, path)
        name = path.rstrip("/").rsplit("/", 1)[-1] or "workspace"
        response = StreamingHttpResponse(_stream(iter(chunks)), content_type="application/x-tar")
        response["Content-Disposition"] = f'attachment; filename="{sandbox_id}-{name}.tar"'
        return response
