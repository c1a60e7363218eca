"""One schedule tick, for hosts that trigger schedules from the system cron instead of Celery beat:

    * * * * *  cd /opt/cocoon && .venv/bin/python manage.py schedules_tick

The runs it creates are sent to the Celery broker (REDIS_URL and a worker); with the embedded worker
(no REDIS_URL) they wait queued until cocoond's recovery sweep hands them over, within 30 s.
"""

from typing import Any

from django.core.management.base import BaseCommand

from scheduling import schedules


class Command(BaseCommand):
    help = "Create the runs of every due schedule (the same tick Celery beat runs)."

    def handle(self, *args: Any, **options: Any) -> None:
        created = schedules.tick()
        self.stdout.write(f"{len(created)} run(s) created")
