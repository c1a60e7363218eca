"""The Celery app. Embedded (in-process worker + beat, memory broker) unless REDIS_URL is set."""

import os
import threading

from celery import Celery
from celery.beat import EmbeddedService
from celery.schedules import crontab
from celery.worker import WorkController

from cocoon.env import env_str

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cocoon.settings")

app = Celery("cocoon")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The poller's tick (read here: this module loads before the settings): it polls every sandbox whose
# agents have no watcher stream (agents.watch), and starts and ends the streams.
POLL_INTERVAL_S = float(env_str("COCOON_POLL_INTERVAL_S") or 2)
app.conf.beat_schedule = {
    "prune-activity": {"task": "cocoon.tasks.prune_activity", "schedule": crontab(minute=17, hour=3)},
    "reconcile-sandboxes": {"task": "sandboxes.tasks.reconcile", "schedule": 30.0},
    # Warm pools: a claim kicks a refill at once; the beat catches rebuilt images and changed settings.
    "refill-pools": {"task": "sandboxes.tasks.refill_pools", "schedule": 5.0},
    # A node whose engine does not answer is unreachable within a tick and its check's timeout (5 s).
    "check-nodes": {"task": "sandboxes.tasks.check_nodes", "schedule": 5.0},
    "poll-agents": {"task": "agents.tasks.poll", "schedule": POLL_INTERVAL_S},
    "sweep-agent-sessions": {"task": "agents.tasks.sweep", "schedule": 300.0},
    "egress": {"task": "egress.tasks.tick", "schedule": 2.0},
    # Cron times have minute resolution: a tick every 10 s starts a run at most 10 s late.
    "tick-schedules": {"task": "scheduling.tasks.tick", "schedule": 10.0},
    "recover-tasks": {"task": "scheduling.tasks.recover", "schedule": 30.0},
    "attention": {"task": "attention.tasks.tick", "schedule": 30.0},
    # What the credential proxy metered: into the database within a tick or two.
    "usage": {"task": "usage.tasks.collect", "schedule": 2.0},
}


class EmbeddedWorker:
    """Celery's own worker and beat, run as threads inside cocoond.

    The in-memory broker and channel layer only reach within one process, so without Redis the
    worker must live where the tasks are sent and the WebSockets are served.
    """

    def __init__(self, concurrency: int) -> None:
        self.worker = WorkController(
            app=app,
            pool="threads",
            concurrency=concurrency,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
        )
        self.beat = EmbeddedService(app, thread=True)

    def start(self) -> None:
        threading.Thread(target=self.worker.start, name="celery-worker", daemon=True).start()
        self.beat.start()

    def stop(self) -> None:
        self.beat.stop()
        self.worker.stop(in_sighandler=False)
