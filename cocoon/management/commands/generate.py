"""Regenerate the client stubs and the method reference from the registry."""

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Regenerate cocoon/client_methods.py and docs/methods.md from the method registry."

    def handle(self, *args: Any, **options: Any) -> None:
        from cocoon.codegen import write_all

        for path in write_all():
            self.stdout.write(f"wrote {path}")
