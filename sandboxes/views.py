"""GET /v1/sandboxes/<id>/archive?path= — a tar stream, never buffered whole in cocoond."""

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import cast

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from cocoon.actors import Actor
from sandboxes import files, services

# Bytes taken from the engine's stream per trip to a thread: it comes in 32 KiB chunks, and a trip per
# chunk held the download to a third of `docker cp` (bench/workspace.py).
BATCH_BYTES = 1 << 20


def _batch(chunks: Iterator[bytes]) -> bytes:
    """The stream's next BATCH_BYTES or so; b"" at its end. Joined once: each byte is copied once."""
    batch, size = [], 0
    for chunk in chunks:
        batch.append(chunk)
        size += len(chunk)
        if size >= BATCH_BYTES:
            break
    return b"".join(batch)


async def _stream(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Pull the engine's synchronous stream in a thread, a batch at a time, the next batch read while
    this one is sent: handing Django a sync iterator under ASGI would make it read the whole archive
    into memory first."""
    next_batch = sync_to_async(_batch, thread_sensitive=False)
    reading = asyncio.ensure_future(next_batch(chunks))
    try:
        while batch := await reading:
            reading = asyncio.ensure_future(next_batch(chunks))
            yield batch
    finally:
        reading.cancel()  # the client went away: the batch under way is read and dropped


class ArchiveView(APIView):
    def get(self, request: Request, sandbox_id: str) -> StreamingHttpResponse:
        path = request.query_params.get("path", "/workspace")
        # not_found for someone else's (cocoon.tenancy); DRF's user is the token's Actor (cocoon.auth)
        services.check_visible(cast(Actor, request.user), sandbox_id)
        chunks = files.archive(sandbox_id, path)
        name = path.rstrip("/").rsplit("/", 1)[-1] or "workspace"
        response = StreamingHttpResponse(_stream(iter(chunks)), content_type="application/x-tar")
        response["Content-Disposition"] = f'attachment; filename="{sandbox_id}-{name}.tar"'
        return response
