"""cocoond's way in and out of a remote node's egress proxy, which shares no folder with it: run by an
exec in the proxy's container (its user, its scratch folder COCOON_EGRESS_DIR). Standard library only.

push WAIT_S   stdin is a policy: it replaces policy.json unless that is newer; then, for at most
              WAIT_S, waits until the proxy acknowledged that version or a newer one (or refused it);
              prints ack.json.
take          prints a header line {"ack": ..., "usage": N, "denied": M, "inodes": [I, J]}, then N
              bytes of usage records and M bytes of denied attempts (whole lines). A file is moved
              aside by one take and read by a later one, once no write has touched it for SETTLED_S:
              the proxy opens it per line, so a line written while it was moved still lands in it.
drop I:N J:M  what cocoond stored of the last take: those bytes of each moved-aside file are removed
              (if it is still the file of that inode).
"""

import contextlib
import fcntl
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


def _current_version() -> int:
    try:
        with open(os.path.join(DIR, "policy.json"), "rb") as file:
            document = json.loads(file.read())
    except (OSError, ValueError):
        return 0
    return _version(document.get("version")) if isinstance(document, dict) else 0


def push(wait_s: float) -> None:
    content = sys.stdin.buffer.read()
    version = _version(json.loads(content).get("version"))
    # One push at a time, and never an older policy over a newer one: a push that was overtaken (sent
    # before a revocation, arriving after it) must not bring back what the newer one took away.
    with open(os.path.join(DIR, ".push.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if version > _current_version():
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


def _taken(name: str) -> tuple[bytes, int]:
    """What there is to send of one file, and the inode of the file it is from (0: nothing)."""
    path = os.path.join(DIR, name)
    held = path + ".taken"
    try:
        status = os.stat(held)
    except FileNotFoundError:
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, held)
        return b"", 0
    if time.time() - status.st_mtime < SETTLED_S:
        return b"", 0
    with open(held, "rb") as file:
        data = file.read(LIMIT)
    data = data[: data.rfind(b"\n") + 1]  # whole lines only (a proxy killed mid-line leaves a part)
    if not data:  # empty, a part of a line, or one longer than any record: nothing cocoond could use
        os.unlink(held)
        return b"", 0
    return data, status.st_ino


def take() -> None:
    parts = [_taken(name) for name in FILES]
    header = {
        "ack": read_ack(),
        "usage": len(parts[0][0]),
        "denied": len(parts[1][0]),
        "inodes": [inode for _data, inode in parts],
    }
    sys.stdout.buffer.write(json.dumps(header).encode() + b"\n" + b"".join(data for data, _inode in parts))


def drop(marks: list[str]) -> None:
    """INODE:SIZE per file: that many bytes go from the file taken, if it is still that file (a take
    that overlapped another must not drop what it did not send)."""
    for name, mark in zip(FILES, marks, strict=True):
        inode, size = (int(part) for part in mark.split(":"))
        held = os.path.join(DIR, name + ".taken")
        try:
            if size <= 0 or os.stat(held).st_ino != inode:
                continue
        except FileNotFoundError:
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
        drop(args)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
