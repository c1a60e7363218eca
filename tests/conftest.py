"""Shared fixtures: live cocoond subprocesses, real WebSocket clients, a real Redis."""

import hashlib
import ipaddress
import itertools
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.netns import namespace_host
from tests.upstream import public_upstream

ROOT = Path(__file__).resolve().parent.parent


def server_env(**extra: str) -> dict[str, str]:
    """Environment for cocoond/celery subprocesses: cocoon's real settings, not the test ones."""
    return os.environ | {"DJANGO_SETTINGS_MODULE": "cocoon.settings", "PYTHONUNBUFFERED": "1"} | extra


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float = 20, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(interval)


# Each cocoond of a run gets sandbox subnets of its own (a /22 of 10.160.0.0/11, in turn from a slot of
# the run's pid), so one instance's open-sandbox fence (egress.fence: rules on the source range) never
# judges another's sandboxes; each one's fence is taken off at the end of the run.
_subnet_slots = itertools.count(os.getpid() * 53 % 2048)
STARTED_INSTANCES: set[str] = set()


def _own_subnets() -> str:
    return str(
        list(ipaddress.IPv4Network("10.160.0.0/11").subnets(new_prefix=22))[next(_subnet_slots) % 2048]
    )


def fence_chain(instance: str) -> str:
    """The chain of an instance's open-sandbox fence (egress.fence.chain)."""
    return "COCOON-" + hashlib.sha256(instance.encode()).hexdigest()[:8]


def remove_fence(instance: str) -> None:
    """Take an instance's fence (egress.fence) off this host: the test run's own clean-up."""
    chain = fence_chain(instance)
    for parent, child in (("DOCKER-USER", chain), ("FORWARD", chain), ("INPUT", f"{chain}-IN")):
        while subprocess.run(["iptables", "-D", parent, "-j", child], capture_output=True).returncode == 0:
            pass
        subprocess.run(["iptables", "-F", child], capture_output=True)
        subprocess.run(["iptables", "-X", child], capture_output=True)


@dataclass
class Cocoond:
    """A real cocoond subprocess on its own port and data directory."""

    data: Path
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)  # extra cocoond options, e.g. --no-access-log
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    subnets: str = field(default_factory=_own_subnets)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/ws"

    @property
    def log(self) -> Path:
        return self.data.parent / f"{self.data.name}.log"

    @property
    def instance(self) -> str:
        return (
            self.env.get("COCOON_INSTANCE")
            or f"{os.environ.get('COCOON_INSTANCE', 'cocoontest')}x{self.port}"
        )

    @property
    def token(self) -> str:
        return (self.data / "admin-token.txt").read_text().strip()

    def start(self) -> "Cocoond":
        env = server_env(
            COCOON_DATA=str(self.data),
            COCOON_BIND=f"127.0.0.1:{self.port}",
            # Each instance owns its engine objects; reconcile would otherwise treat another's as orphans.
            COCOON_INSTANCE=self.instance,
            COCOON_SANDBOX_SUBNETS=self.subnets,
        )
        STARTED_INSTANCES.add(self.instance)
        env.update(self.env)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "cocoond", *self.args],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._healthy, timeout=60)
        return self

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"cocoond exited with {self.proc.returncode}:\n{self.log.read_text()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> "Cocoond":
        self.stop()
        return self.start()

    def post(
        self,
        method: str,
        params: Any = None,
        token: str | None = "admin",
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        headers = dict(headers or {})
        if token == "admin":
            token = self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content is None and params is not None:
            content = json.dumps(params).encode()
        return httpx.post(
            f"{self.url}/v1/rpc/{method}", content=content, headers=headers, params=query, timeout=180
        )

    def call(self, method: str, params: Any = None, token: str | None = "admin") -> Any:
        response = self.post(method, params, token=token)
        assert response.status_code == 200, response.text
        return response.json()["result"]

    @contextmanager
    def ws(self, token: str | None = "admin", headers: dict[str, str] | None = None) -> Iterator["WsClient"]:
        headers = dict(headers or {})
        if token == "admin":
            token = self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        with connect(self.ws_url, additional_headers=headers, open_timeout=10) as connection:
            yield WsClient(connection)


class WsClient:
    """A thin JSON-RPC helper over a real WebSocket connection."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.next_id = 0
        self.pending: list[dict[str, Any]] = []

    def send(self, frame: Any) -> None:
        self.connection.send(frame if isinstance(frame, str) else json.dumps(frame))

    def receive(self, timeout: float = 10) -> dict[str, Any]:
        if self.pending:
            return self.pending.pop(0)
        return json.loads(self.connection.recv(timeout=timeout))

    def request(self, method: str, params: Any = None, timeout: float = 10) -> dict[str, Any]:
        """Send one call and return its answer frame; frames for others are kept for receive()."""
        self.next_id += 1
        call_id = self.next_id
        self.send({"id": call_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        while True:
            frame = json.loads(self.connection.recv(timeout=max(0.1, deadline - time.monotonic())))
            if frame.get("id") == call_id and "subscription" not in frame:
                return frame
            self.pending.append(frame)

    def call(self, method: str, params: Any = None) -> Any:
        frame = self.request(method, params)
        assert "result" in frame, frame
        return frame["result"]

    def next_event(self, timeout: float = 10) -> dict[str, Any]:
        frame = self.receive(timeout=timeout)
        assert "subscription" in frame, frame
        return frame


@pytest.fixture
def start_cocoond(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any
) -> Iterator[Callable[..., Cocoond]]:
    """Start cocoond instances for one test; every one started is stopped afterwards."""
    started: list[Cocoond] = []

    def start(env: dict[str, str] | None = None, data: Path | None = None) -> Cocoond:
        data = data or tmp_path_factory.mktemp("cocoond") / "data"
        instance = Cocoond(data=data, env=env or {})
        started.append(instance)
        return instance.start()

    yield start
    # Every instance is stopped before anything that could fail; a failing clean-up must not leave
    # a cocoond running.
    for instance in started:
        instance.stop()
    for instance in started:
        # Networks are a scarce pool of address ranges: give each instance's back at once.
        remove_instance_objects(docker_client, instance.instance)


# The browser tests drive Debian's Chromium through Playwright (it downloads no browser of its own).
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def cocoond(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[Cocoond]:
    """One cocoond shared by the tests that do not restart or reconfigure it."""
    instance = Cocoond(data=tmp_path_factory.mktemp("shared") / "data").start()
    yield instance
    instance.stop()


@dataclass
class RedisServer:
    """A real redis-server of our own on a loopback port, without persistence; stopped (and started again
    on the same port, empty, as after a crash) by its own PID."""

    directory: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: run scripts/provision")
        options = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(
            [binary, *options, "--dir", str(self.directory)], stdout=subprocess.DEVNULL
        )
        wait_until(lambda: _redis_ready(self.port), timeout=10)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, stopped by PID afterwards."""
    server = RedisServer(tmp_path)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL cluster of our own (Debian's `postgresql`, installed by scripts/provision) on a
    free loopback port: initdb'd into a fresh directory, stopped by PID afterwards. As root it runs as
    the `postgres` user, which the server requires, so its directory is one that user can reach."""
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    if not binaries:
        pytest.fail("PostgreSQL is not installed: run scripts/provision")
    bin_dir = binaries[-1].parent
    as_user: dict[str, Any] = {}
    base = Path(tempfile.mkdtemp(prefix="cocoon-pg-"))
    if os.geteuid() == 0:
        as_user = {"user": "postgres", "group": "postgres", "extra_groups": []}
        shutil.chown(base, "postgres", "postgres")
    password = secrets.token_urlsafe(16)
    (base / "password").write_text(password + "\n")
    if as_user:
        shutil.chown(base / "password", "postgres", "postgres")
    port = free_port()
    proc = None
    try:
        subprocess.run(
            [bin_dir / "initdb", "-D", base / "data", "-U", "cocoon", "--pwfile", base / "password",
             "--auth-host=scram-sha-256", "--auth-local=peer", "-E", "UTF8", "--no-sync"],
            check=True, stdout=subprocess.DEVNULL, **as_user,
        )  # fmt: skip
        with (base / "postgres.log").open("ab") as log:
            proc = subprocess.Popen(
                [bin_dir / "postgres", "-D", base / "data", "-p", str(port), "-h", "127.0.0.1",
                 "-k", base, "-c", "fsync=off"],
                stdout=log, stderr=subprocess.STDOUT, **as_user,
            )  # fmt: skip
        admin_url = f"postgresql://cocoon:{password}@127.0.0.1:{port}/postgres"
        wait_until(lambda: _postgres_ready(admin_url, proc), timeout=30)
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute("CREATE DATABASE cocoon")
        yield f"postgres://cocoon:{password}@127.0.0.1:{port}/cocoon"
    finally:
        if proc is not None:
            proc.terminate()  # SIGTERM: PostgreSQL's "smart" shutdown
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def _postgres_ready(url: str, proc: subprocess.Popen) -> bool:
    import psycopg

    if proc.poll() is not None:
        raise RuntimeError(f"postgres exited with {proc.returncode}")
    try:
        psycopg.connect(url, connect_timeout=1).close()
    except psycopg.OperationalError:
        return False
    return True


def _redis_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


# -- engine fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """The real Docker engine; at the end, everything the tests' instances made is removed."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as error:
        pytest.fail(f"dockerd is not running ({error}): run scripts/provision")
    yield client
    remove_instance_objects(client, os.environ["COCOON_INSTANCE"], prefix=True)


def remove_instance_objects(client: Any, instance: str, prefix: bool = False) -> None:
    """Remove the containers, volumes and networks of one instance (or of all starting with a prefix)."""

    def ours(labels: dict[str, str] | None) -> bool:
        value = (labels or {}).get("io.cocoon.instance", "")
        return value.startswith(instance) if prefix else value == instance

    for container in client.containers.list(all=True, filters={"label": "io.cocoon.instance"}):
        if ours(container.labels):
            container.remove(force=True, v=True)
    for volume in client.volumes.list(filters={"label": "io.cocoon.instance"}):
        if ours(volume.attrs.get("Labels")):
            volume.remove(force=True)
    for network in client.networks.list(filters={"label": "io.cocoon.instance"}):
        if ours(network.attrs.get("Labels")):
            network.remove()
    for started in [
        each for each in STARTED_INSTANCES if each.startswith(instance) and (prefix or each == instance)
    ]:
        remove_fence(started)


@contextmanager
def open_to(instance: "Cocoond", address: str) -> Iterator[None]:
    """Let the instance's open sandboxes reach a host address (a stand-in served on a gateway, which the
    fence refuses them otherwise) for the block: sandbox.openAllowCidrs, as an operator allows a mirror."""
    before = instance.call("settings.get")["sandbox"]["openAllowCidrs"]
    instance.call("settings.update", {"sandbox": {"openAllowCidrs": [*before, f"{address}/32"]}})
    try:
        yield
    finally:
        instance.call("settings.update", {"sandbox": {"openAllowCidrs": before}})


@pytest.fixture(scope="session", autouse=True)
def _fences_removed_at_the_end() -> Iterator[None]:
    """The open-sandbox fences of every cocoond this run started leave with the run, and the one this
    process's own engine calls may have set (a settings change under a committing test database)."""
    yield
    for instance in {*STARTED_INSTANCES, os.environ["COCOON_INSTANCE"]}:
        remove_fence(instance)


@pytest.fixture(scope="session")
def sandbox_image(docker_client: Any) -> str:
    """cocoon-sandbox:latest, built from images/sandbox on a base image seeded offline."""
    subprocess.run([str(ROOT / "scripts/seed-base-image")], check=True)
    image, _ = docker_client.images.build(
        path=str(ROOT / "images/sandbox"), tag="cocoon-sandbox:latest", target="base", rm=True
    )
    # Also tagged by content: tests that need this very image ask for it by this name, even when
    # another checkout on the same engine has re-tagged :latest meanwhile.
    tag = f"cocoon-sandbox:test-{image.id.split(':')[1][:12]}"
    image.tag(*tag.split(":"))
    # The egress proxy's image too, so no test's first egress sandbox waits for its build.
    from egress.container import CONTEXT, image_tag

    docker_client.images.build(path=str(CONTEXT), tag=image_tag(), rm=True)
    return tag


def instance_objects(client: Any, instance: str) -> dict[str, set[str]]:
    """Names of the containers, volumes and networks of one cocoon instance, without the shared ones it
    makes on demand (the toolbox volume, the egress proxy and its outbound network), which belong to no
    sandbox."""
    label = f"io.cocoon.instance={instance}"
    containers = {c.name for c in client.containers.list(all=True, filters={"label": label})}
    networks = {n.name for n in client.networks.list(filters={"label": label})}
    return {
        "containers": containers - {f"{instance}-egress-proxy"},
        "volumes": {v.name for v in client.volumes.list(filters={"label": label})} - {f"{instance}-agents"},
        "networks": networks - {f"{instance}-outbound"},
    }


@pytest.fixture(scope="session")
def outside_host() -> Iterator[tuple[str, int]]:
    """A test host 'outside' the sandboxes: a network namespace of our own behind a veth pair, with a
    TCP server on it. Traffic to it from a sandbox crosses the host exactly like traffic to the internet."""
    # A plain TCP server: http.server would first wait for a reverse DNS lookup that cannot succeed.
    port, subnet = 8080, f"198.18.{os.getpid() % 250}"  # per run: two runs at once do not share it
    serve = (
        "import socketserver as s\n"
        "class H(s.BaseRequestHandler):\n def handle(self): self.request.sendall(b'outside')\n"
        f"s.TCPServer(('{subnet}.2', {port}), H).serve_forever()"
    )
    with namespace_host("out", subnet, [sys.executable, "-c", serve], port) as address:
        yield address, port


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The recording stand-in for the internet behind the egress proxy (tests/upstream.py)."""
    with public_upstream(tmp_path_factory.mktemp("upstream")) as stand_in:
        yield stand_in


@pytest.fixture(scope="session")
def toolbox_cocoond(cocoond, sandbox_image):
    """The shared cocoond with the toolbox installed (a copy of the cached npm staging folder)."""
    if not cocoond.call("toolbox.status")["installed"]:
        with cocoond.ws() as ws:
            ws.call("events.subscribe", {"types": ["toolbox.install"]})
            cocoond.call("toolbox.install")
            status = None
            while status not in {"done", "failed"}:
                status = ws.next_event(timeout=900)["event"]["data"]["status"]
        assert status == "done"
    return cocoond
