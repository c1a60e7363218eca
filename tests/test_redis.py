"""With REDIS_URL: a separate Celery worker process, whose events reach cocoond's WebSocket clients."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, server_env


@pytest.fixture
def celery_worker(redis_url):
    """Start `celery -A cocoon worker -B` as documented, for a given data directory."""
    started = []

    def start(data: Path) -> subprocess.Popen:
        log = (data.parent / "worker.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cocoon", "worker", "-B", "--concurrency=1"],
            cwd=ROOT,
            env=server_env(COCOON_DATA=str(data), REDIS_URL=redis_url),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)


def test_an_event_from_a_separate_worker_process_reaches_a_websocket(start_cocoond, redis_url, celery_worker):
    instance = start_cocoond(env={"REDIS_URL": redis_url})
    assert instance.call("system.info")["embeddedWorker"] is False
    instance.call("secrets.set", {"name": "OLD_NEWS", "value": "x"})
    with instance.ws() as ws:
        ws.call("events.subscribe", {"types": ["activity"]})
        instance.call("activity.prune", {"olderThanDays": 0})
        # cocoond runs no worker of its own: the task waits in Redis until one comes.
        with pytest.raises(TimeoutError):
            ws.next_event(timeout=2)
        worker = celery_worker(instance.data)
        event = ws.next_event(timeout=60)["event"]
        assert event["data"]["key"] == "activity.pruned"
        assert event["data"]["params"]["count"] >= 1
        assert worker.poll() is None


def test_events_cross_between_two_websocket_connections_over_redis(start_cocoond, redis_url):
    instance = start_cocoond(env={"REDIS_URL": redis_url})
    with instance.ws() as listener, instance.ws() as actor:
        listener.call("events.subscribe", {"types": ["settings.updated"]})
        actor.call("settings.update", {"sandbox": {"image": "cocoon-sandbox:db"}})
        event = listener.next_event()["event"]
        assert event["data"]["sandbox"]["image"] == "cocoon-sandbox:db"
