"""cocoond: migrate, set up on first start, then serve the ASGI app with Daphne."""

import json
import os
import sys
from pathlib import Path
from typing import Any

from daphne.endpoints import build_endpoint_description_strings
from daphne.server import Server
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from cocoon import setup
from cocoon.env import parse_bind
from cocoon.errors import CocoonError
from cocoon.logs import RedactingAccessLog


class Command(BaseCommand):
    help = "Run cocoond: migrate, first-run setup, embedded worker (without REDIS_URL), Daphne."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", default=settings.COCOON_BIND, help="HOST:PORT (COCOON_BIND)")
        parser.add_argument("--no-access-log", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        os.umask(0o077)  # everything cocoond creates in COCOON_DATA is private
        try:
            host, port = parse_bind(options["bind"])
        except ValueError as error:
            raise CommandError(str(error)) from error

        config_path = Path(settings.COCOON_CONFIG).expanduser() if settings.COCOON_CONFIG else None
        # Processes sharing the database take turns: the first migrates and sets up, the others find it done.
        with setup.startup_lock():
            call_command("migrate", interactive=False, verbosity=0)
            try:
                setup.first_run(config_path)
            except ValueError as error:
                raise CommandError(str(error)) from error
            except CocoonError as error:
                raise CommandError(f"COCOON_CONFIG is invalid: {json.dumps(error.render())}") from error

        worker = None
        if settings.CELERY_EMBEDDED:
            from cocoon.celery import EmbeddedWorker

            worker = EmbeddedWorker(settings.COCOON_TASK_CONCURRENCY + settings.EMBEDDED_SPARE_THREADS)
            worker.start()

        from sandboxes.setup import ensure_on_start

        ensure_on_start()

        from agents.poller import SWEEP_GRACE_S, sweep_sessions

        # Before serving: no spawn of this process is under way, so with the embedded worker every
        # session without its row is left over from the last cocoond.
        sweep_sessions(0 if settings.CELERY_EMBEDDED else SWEEP_GRACE_S)

        from scheduling.schedules import start_up

        start_up()

        from server.asgi import application  # after setup: importing it builds the app

        self.stdout.write(
            f"cocoond listening on http://{host}:{port} (data: {settings.DATA_DIR}; "
            f"admin token: {settings.ADMIN_TOKEN_FILE})"
        )
        self.stdout.flush()
        try:
            Server(
                application=application,
                endpoints=build_endpoint_description_strings(host=host, port=port),
                action_logger=None if options["no_access_log"] else RedactingAccessLog(sys.stdout),
                websocket_timeout=-1,
                application_close_timeout=10,
            ).run()
        finally:
            if worker is not None:
                worker.stop()
