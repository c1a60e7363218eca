"""The `cocoon` command: every operation of the API from a shell, JSON out for scripts.

    cocoon login --url http://127.0.0.1:7420 --token cct_...
    cocoon sandbox create --network none
    cocoon sandbox exec sb_... -- git status
    cocoon call settings.get
    cocoon events --type sandbox.updated

Output is JSON when stdout is not a terminal (or with --json). Exit codes follow the error class:
2 bad input, 3 not allowed, 4 not found, 5 conflict, 6 timeout, 1 anything else.
"""

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cocoon.client import Client, CocoonError

EXIT_CODES = {
    "invalid_json": 2,
    "invalid_request": 2,
    "invalid_params": 2,
    "unauthorized": 3,
    "token_revoked": 3,
    "token_expired": 3,
    "forbidden": 3,
    "not_found": 4,
    "conflict": 5,
    "timeout": 6,
}


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cocoon" / "config.json"


def load_config() -> dict[str, str]:
    path = config_path()
    stored = json.loads(path.read_text()) if path.exists() else {}
    url = os.environ.get("COCOON_URL") or stored.get("url") or "http://127.0.0.1:7420"
    return {"url": url, "token": os.environ.get("COCOON_TOKEN") or stored.get("token", "")}


def save_config(url: str, token: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(f"{path}.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"url": url, "token": token}, handle)
    os.replace(f"{path}.tmp", path)
    return path


def _print(value: Any, as_json: bool) -> None:
    if as_json or not isinstance(value, (dict, list)):
        print(json.dumps(value, indent=None if as_json else 2, ensure_ascii=False))
        return
    rows = value if isinstance(value, list) else [value]
    if not rows or not isinstance(rows[0], dict):
        print(json.dumps(value, indent=2, ensure_ascii=False))
        return
    columns = [key for key in rows[0] if not isinstance(rows[0][key], (dict, list))][:7]
    widths = {
        column: max(len(column), *(len(str(row.get(column, ""))) for row in rows)) for column in columns
    }
    print("  ".join(column.ljust(widths[column]) for column in columns))
    for row in rows:
        print("  ".join(str(row.get(column, "")).ljust(widths[column]) for column in columns))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cocoon", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="JSON output even on a terminal")
    parser.add_argument("--table", action="store_true", help="a table even when piped")
    parser.add_argument("--lang", default=os.environ.get("COCOON_LANG"), help="language of messages (en, de)")
    commands = parser.add_subparsers(dest="command", required=True)

    login = commands.add_parser("login", help="store the server URL and token (0600)")
    login.add_argument("--url", required=True)
    login.add_argument("--token", required=True)

    call = commands.add_parser("call", help="call any method: cocoon call sandbox.list '{}'")
    call.add_argument("method")
    call.add_argument("params", nargs="?", default="{}", help="JSON params (or - for stdin)")

    commands.add_parser("methods", help="the methods this token may call")

    events = commands.add_parser("events", help="stream events as JSON lines")
    events.add_argument("--type", action="append", dest="types")
    events.add_argument("--sandbox")

    sandbox = commands.add_parser("sandbox", help="sandboxes").add_subparsers(dest="action", required=True)
    create = sandbox.add_parser("create")
    for option in ("name", "image", "network", "repo", "branch"):
        create.add_argument(f"--{option}")
    sandbox.add_parser("list")
    for action in ("get", "start", "stop", "rm"):
        sandbox.add_parser(action).add_argument("sandbox_id")
    execute = sandbox.add_parser("exec")
    execute.add_argument("sandbox_id")
    execute.add_argument("argv", nargs=argparse.REMAINDER)
    diff = sandbox.add_parser("diff")
    diff.add_argument("sandbox_id")
    diff.add_argument("paths", nargs="*")

    agent = commands.add_parser("agent", help="agents").add_subparsers(dest="action", required=True)
    spawn = agent.add_parser("spawn")
    spawn.add_argument("sandbox_id")
    spawn.add_argument("profile")
    spawn.add_argument("--prompt")
    listing = agent.add_parser("list")
    listing.add_argument("--sandbox")
    for action in ("get", "kill", "read", "attach"):
        agent.add_parser(action).add_argument("agent_id")
    send = agent.add_parser("send", help="type text and Enter")
    send.add_argument("agent_id")
    send.add_argument("text")
    keys = agent.add_parser("keys", help="press named keys: Enter Escape C-c ...")
    keys.add_argument("agent_id")
    keys.add_argument("keys", nargs="+")
    waiting = agent.add_parser("wait")
    waiting.add_argument("agent_id")
    waiting.add_argument("until", nargs="+")
    waiting.add_argument("--timeout", type=float, default=300)

    files = commands.add_parser("files", help="files in a sandbox").add_subparsers(
        dest="action", required=True
    )
    for action in ("ls", "cat", "mkdir", "rm"):
        command = files.add_parser(action)
        command.add_argument("sandbox_id")
        command.add_argument("path")
    put = files.add_parser("put", help="write stdin (or --content) to a file")
    put.add_argument("sandbox_id")
    put.add_argument("path")
    put.add_argument("--content")

    engine = commands.add_parser("engine", help="what another data directory left on the engines")
    engine_actions = engine.add_subparsers(dest="action", required=True)
    engine_actions.add_parser("foreign")
    engine_actions.add_parser("remove").add_argument("sandbox_id")
    adopt = engine_actions.add_parser("adopt")
    adopt.add_argument("sandbox_id")
    adopt.add_argument("--name")
    return parser


def _run(args: argparse.Namespace, client: Client) -> tuple[Any, int]:
    """The value to print and the exit code."""
    if args.command == "call":
        raw = sys.stdin.read() if args.params == "-" else args.params
        try:
            params = json.loads(raw)
        except json.JSONDecodeError as error:
            raise CocoonError("invalid_json", f"params are not JSON: {error}") from None
        return client.call(args.method, params), 0
    if args.command == "methods":
        return [
            {"name": m["name"], "admin": m["admin"], "agentSide": m["agentSide"]}
            for m in client.system_methods()
        ], 0
    if args.command == "sandbox":
        if args.action == "create":
            options = {key: getattr(args, key) for key in ("name", "image", "network", "repo", "branch")}
            return client.sandbox_create(**options), 0
        if args.action == "list":
            return client.sandbox_list(), 0
        if args.action == "exec":
            argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            result = client.sandbox_exec(sandbox_id=args.sandbox_id, command=argv)
            if not args.json and sys.stdout.isatty():
                sys.stdout.write(result["stdout"])
                sys.stderr.write(result["stderr"])
                return None, result["exitCode"]
            return result, result["exitCode"]
        if args.action == "diff":
            result = client.sandbox_diff(sandbox_id=args.sandbox_id, paths=args.paths or None)
            return result, 0
        method: dict[str, Callable[..., Any]] = {
            "get": client.sandbox_get,
            "start": client.sandbox_start,
            "stop": client.sandbox_stop,
            "rm": client.sandbox_delete,
        }
        return method[args.action](sandbox_id=args.sandbox_id), 0
    if args.command == "agent":
        if args.action == "spawn":
            return client.agent_spawn(sandbox_id=args.sandbox_id, profile=args.profile, prompt=args.prompt), 0
        if args.action == "list":
            return client.agent_list(sandbox_id=args.sandbox), 0
        if args.action == "read":
            screen = client.agent_read(agent_id=args.agent_id)
            if not args.json and sys.stdout.isatty():
                sys.stdout.write(screen["screen"])
                return None, 0
            return screen, 0
        if args.action == "send":
            return client.agent_send_input(agent_id=args.agent_id, text=args.text), 0
        if args.action == "keys":
            return client.agent_send_keys(agent_id=args.agent_id, keys=args.keys), 0
        if args.action == "wait":
            return client.agent_wait(agent_id=args.agent_id, until=args.until, timeout_s=args.timeout), 0
        if args.action == "attach":
            return None, attach(client, args.agent_id)
        method = {"get": client.agent_get, "kill": client.agent_kill}
        return method[args.action](agent_id=args.agent_id), 0
    if args.command == "files":
        where = {"sandbox_id": args.sandbox_id, "path": args.path}
        if args.action == "ls":
            return client.files_list(**where)["entries"], 0
        if args.action == "cat":
            result = client.files_read(**where)
            if result["encoding"] == "utf-8" and not args.json:
                sys.stdout.write(result["content"])
                return None, 0
            return result, 0
        if args.action == "put":
            content = args.content if args.content is not None else sys.stdin.read()
            return client.files_write(**where, content=content), 0
        if args.action == "mkdir":
            return client.files_mkdir(**where), 0
        return client.files_delete(**where, recursive=True), 0
    if args.command == "engine":
        if args.action == "foreign":
            return client.engine_foreign(), 0
        if args.action == "adopt":
            return client.engine_adopt(sandbox_id=args.sandbox_id, name=args.name), 0
        return client.engine_remove(sandbox_id=args.sandbox_id), 0
    raise AssertionError(args.command)


DETACH = b"\x1d"  # Ctrl-]


def attach(client: Client, agent_id: str) -> int:
    """A real terminal onto the agent: raw mode, resize on SIGWINCH, Ctrl-] detaches."""
    import select
    import shutil
    import signal
    import termios
    import threading
    import tty

    from websockets.sync.client import connect

    cols, rows = shutil.get_terminal_size()
    url = client.url.replace("http", "ws", 1) + f"/v1/agents/{agent_id}/attach?cols={cols}&rows={rows}"
    with connect(url, additional_headers={"Authorization": f"Bearer {client.token}"}) as ws:
        ended = threading.Event()

        def pump() -> None:
            # Runs until the connection ends, however it ends.
            with contextlib.suppress(Exception):
                for frame in ws:
                    sys.stdout.buffer.write(frame if isinstance(frame, bytes) else frame.encode())
                    sys.stdout.buffer.flush()
            ended.set()

        def resize(*_args: Any) -> None:
            width, height = shutil.get_terminal_size()
            ws.send(json.dumps({"type": "resize", "cols": width, "rows": height}))

        stdin = sys.stdin.fileno()
        saved = termios.tcgetattr(stdin) if os.isatty(stdin) else None
        signal.signal(signal.SIGWINCH, resize)
        try:
            if saved is not None:
                tty.setraw(stdin)
            threading.Thread(target=pump, daemon=True).start()
            while not ended.is_set():
                if not select.select([stdin], [], [], 0.2)[0]:
                    continue
                data = os.read(stdin, 4096)
                head, detach, _rest = data.partition(DETACH)
                if head:
                    ws.send(head)
                if detach or not data:
                    break
        finally:
            if saved is not None:
                termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "login":
        path = save_config(args.url, args.token)
        print(json.dumps({"saved": str(path)}))
        return 0
    config = load_config()
    client = Client(config["url"], config["token"] or None, language=args.lang)
    as_json = args.json or (not args.table and not sys.stdout.isatty())
    try:
        if args.command == "events":
            filters = {
                key: value for key, value in (("types", args.types), ("sandboxId", args.sandbox)) if value
            }
            for event in client.events(**filters):
                print(json.dumps(event), flush=True)
            return 0
        value, code = _run(args, client)
    except CocoonError as error:
        print(
            json.dumps({"error": {"code": error.code, "message": error.message, "details": error.details}}),
            file=sys.stderr,
        )
        return EXIT_CODES.get(error.code, 1)
    except KeyboardInterrupt:
        return 130
    if value is not None:
        _print(value, as_json)
    return code


if __name__ == "__main__":
    sys.exit(main())
