"""Generated artefacts of the method registry: typed client stubs and the method reference.

`python manage.py generate` rewrites both; tests fail when either no longer matches the registry.
"""

import json
import keyword
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from cocoon.registry import Method, registry

STUBS = Path(settings.BASE_DIR) / "cocoon" / "client_methods.py"
DOCS = Path(settings.BASE_DIR) / "docs" / "methods.md"
PYTHON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}


def _python_type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "str"
    kind = schema.get("type")
    if isinstance(kind, str):
        return PYTHON_TYPES.get(kind, "Any")
    return "Any"


def _snake(name: str) -> str:
    snake = "".join(f"_{char.lower()}" if char.isupper() else char for char in name)
    return f"{snake}_" if keyword.iskeyword(snake) else snake


def _stub(method: Method, asynchronous: bool) -> list[str]:
    properties = method.params.get("properties", {})
    required = method.params.get("required", [])
    arguments = [f"{_snake(name)}: {_python_type(properties[name])}" for name in required]
    arguments += [
        f"{_snake(name)}: {_python_type(schema)} | None = None"
        for name, schema in properties.items()
        if name not in required
    ]
    signature = ", ".join(["self", *(["*", *arguments] if arguments else [])])
    pairs = ", ".join(f'"{name}": {_snake(name)}' for name in properties)
    prefix, call = ("async ", "await self.call") if asynchronous else ("", "self.call")
    return [
        f"    {prefix}def {method.name.replace('.', '_')}({signature}) -> Any:",
        f'        """{method.description}"""',
        f'        return {call}("{method.name}", _params({{{pairs}}}))',
        "",
    ]


def client_stubs() -> str:
    lines = [
        '"""Typed method stubs for cocoon.client, generated from the method registry by',
        "`python manage.py generate`. Do not edit: a test fails when this file and the registry differ.",
        '"""',
        "",
        "from typing import Any",
        "",
        "",
        "def _params(values: dict[str, Any]) -> dict[str, Any]:",
        "    return {key: value for key, value in values.items() if value is not None}",
        "",
    ]
    for class_name, asynchronous in (("Methods", False), ("AsyncMethods", True)):
        lines += ["", f"class {class_name}:"]
        call = "async def call" if asynchronous else "def call"
        lines += [
            f"    {call}(self, method: str, params: dict[str, Any] | None = None) -> Any:",
            "        raise NotImplementedError",
            "",
        ]
        for method in registry.all():
            if not method.ws_only:
                lines += _stub(method, asynchronous)
    source = "\n".join(lines).rstrip() + "\n"
    # Formatted like the rest of the code, so the file in the repository is byte-for-byte this output.
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run(
        [str(ruff), "format", "-"], input=source, capture_output=True, text=True, check=True
    ).stdout


def method_docs() -> str:
    lines = [
        "# cocoon methods",
        "",
        "Generated from the method registry by `python manage.py generate`; every method answers",
        '`{"result": ...}` or `{"error": {"code", "message", "details"}}` (see README).',
        "",
    ]
    for method in registry.all():
        flags = ", ".join(
            flag
            for flag, on in (
                ("admin", method.admin),
                ("agent side / MCP", method.agent_side),
                ("WebSocket only", method.ws_only),
            )
            if on
        )
        lines += [f"## `{method.name}`", "", method.description, ""]
        if flags:
            lines += [f"*{flags}*", ""]
        lines += ["Params:", "", "```json", json.dumps(method.params, indent=2), "```", ""]
        lines += ["Result:", "", "```json", json.dumps(method.result, indent=2), "```", ""]
    return "\n".join(lines)


def write_all() -> list[Path]:
    DOCS.parent.mkdir(exist_ok=True)
    STUBS.write_text(client_stubs())
    DOCS.write_text(method_docs())
    return [STUBS, DOCS]
