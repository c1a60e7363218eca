"""The floor for bench/agents.py's keystroke echo: a bare ASGI app on Daphne that relays a WebSocket to
`tmux attach` through the driver's terminal (DockerTty) as cocoond's attach does (the descriptor served
on the event loop, output through a queue), with no Django, Channels, auth or database.

Run by the benchmark as `daphne bench.bare_attach:application`, with COCOON_BENCH_CONTAINER and
COCOON_BENCH_AGENT naming the container and the agent's tmux session.
"""

import asyncio
import os
from typing import Any

import docker

from sandboxes.drivers.docker.streams import DockerTty  # needs no Django settings

CONTAINER = os.environ.get("COCOON_BENCH_CONTAINER", "")
AGENT = os.environ.get("COCOON_BENCH_AGENT", "")


async def application(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    api = docker.from_env().api
    command = ["tmux", "-L", "cocoon", "attach", "-t", f"={AGENT}"]
    exec_id = api.exec_create(CONTAINER, command, stdin=True, tty=True, user="agent")["Id"]
    tty = DockerTty(api, exec_id, api.exec_start(exec_id, socket=True, tty=True))  # cocoond's terminal
    fd = tty.fileno()
    os.set_blocking(fd, False)
    await send({"type": "websocket.accept"})
    loop, output = asyncio.get_running_loop(), asyncio.Queue()

    def readable() -> None:
        chunk = tty.read()
        if not chunk:
            loop.remove_reader(fd)
        output.put_nowait(chunk)

    async def pump() -> None:
        while chunk := await output.get():
            await send({"type": "websocket.send", "bytes": chunk})

    loop.add_reader(fd, readable)
    pumping = asyncio.create_task(pump())
    try:
        while (message := await receive())["type"] == "websocket.receive":
            tty.write(message["bytes"])  # a keystroke: the terminal always has room for it
    finally:
        loop.remove_reader(fd)
        pumping.cancel()
        tty.close()
