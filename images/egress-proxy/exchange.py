"""cocoond's way in and out of a remote node's egress proxy, which shares no folder with it: run by an
exec in the proxy's container (its user, its scratch folder COCOON_EGRESS_DIR). Standard library only.

push WAIT_S   stdin is a policy: it replaces policy.json; then, for at most WAIT_S, waits until the
              proxy acknowledged that version (or refused it); prints ack.json.
take          prints a header line {"ack": ..., "usage": N, "denied": M}, then N bytes of usage records
              and M bytes of denied attempts (whole lines). A file is moved aside by one take and read by
              a later one, once no write has touched it for SETTLED_S: the proxy opens it per line, so a
              line written while it was moved still lands in it.
drop N M      what cocoond stored of the last take: those bytes of each moved-aside file are removed.
"""

import contextlib
import json
import os
import sys
import time

DIR = os.environ.get("COCOON_EGRESS_DIR", "/etc/cocoon-egress")
FILES = ("usage.jsonl", "denied.jsonl")
LIMIT = 1024 * 1024  # per file and take: a take stays far below what cocoond reads of an exec's output
SETTLED_S = 1.0
ACK_POLL_S = 0.01


def read_ack() -> dict:
    try:
        with open(os.path.join(DIR, "ack.json"), "rb") as file:
            ack = json.loads(file.read(64 * 1024))
    except (OSError, ValueError):
        return {}
    return ack if isinstance(ack, dict) else {}


def _version(value: object) -> int:
    return value if isinstance(value, int) else 0


def push(wait_s: float) -> None:
    content = sys.stdin.buffer.read()
    version = _version(json.loads(content).get("version"))
    temporary = os.path.join(DIR, ".policy.json.push")
    with open(temporary, "wb") as file:
        file.write(content)
    os.replace(temporary, os.path.join(DIR, "policy.json"))
    deadline = time.monotonic() + wait_s
    while True:
        ack = read_ack()
        refused = ack.get("refused") if isinstance(ack.get("refused"), dict) else {}
        done = max(_version(ack.get("version")), _version(refused.get("version"))) >= version
        if done or time.monotonic() > deadline:
            break
        time.sleep(ACK_POLL_S)
    sys.stdout.write(json.dumps(ack))


def _taken(name: str) -> bytes:
    path = os.path.join(DIR, name)
    held = path + ".taken"
    try:
        if time.time() - os.stat(held).st_mtime < SETTLED_S:
            return b""
    except FileNotFoundError:
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, held)
        return b""
    with open(held, "rb") as file:
        data = file.read(LIMIT + 1)
    if len(data) > LIMIT:
        data = data[: data.rfind(b"\n", 0, LIMIT) + 1]
    return data


def take() -> None:
    parts = [_taken(name) for name in FILES]
    header = {"ack": read_ack(), "usage": len(parts[0]), "denied": len(parts[1])}
    sys.stdout.buffer.write(json.dumps(header).encode() + b"\n" + b"".join(parts))


def drop(sizes: list[int]) -> None:
    for name, size in zip(FILES, sizes, strict=True):
        held = os.path.join(DIR, name + ".taken")
        if size <= 0 or not os.path.exists(held):
            continue
        with open(held, "rb") as file:
            file.seek(size)
            rest = file.read()
        if rest:
            temporary = held + ".rest"
            with open(temporary, "wb") as file:
                file.write(rest)
            os.replace(temporary, held)
        else:
            os.unlink(held)


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "push":
        push(float(args[0]))
    elif command == "take":
        take()
    elif command == "drop":
        drop([int(arg) for arg in args])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
