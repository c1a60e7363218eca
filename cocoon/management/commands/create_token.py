"""Create an API token from the shell, e.g. to regain access after admin-token.txt was lost."""

from typing import Any

from django.core.management.base import BaseCommand

from cocoon.actors import SYSTEM_ACTOR
from cocoon.choices import TokenScope
from cocoon.tokens import create_token


class Command(BaseCommand):
    help = "Create an API token and print it (shown once)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--name", default="cli")
        parser.add_argument("--scope", choices=TokenScope.values, default=TokenScope.ADMIN)

    def handle(self, *args: Any, **options: Any) -> None:
        _token, plain = create_token(options["name"], options["scope"], actor=SYSTEM_ACTOR)
        self.stdout.write(plain)
