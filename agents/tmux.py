"""What runs inside a sandbox for its agents: their tmux sessions (`tmux -L cocoon`), the start wrapper,
the poll script and the watcher's control-mode stream. Everything these print is the sandbox's, so
hostile: the host parses it strictly (agents.poller, agents.stream)."""

import base64
import binascii
import re
import shlex

from sandboxes.drivers.base import TMUX_SOCKET, DriverError, ExecResult
from sandboxes.nodes import driver_of

TMUX = ["tmux", "-L", TMUX_SOCKET]
TMUX_LINE = shlex.join(TMUX)  # the same, in the scripts below
KEYS = {
    "Enter", "Escape", "Tab", "BTab", "Space", "BSpace", "Up", "Down", "Left", "Right", "Home", "End",
    "PageUp", "PageDown", "DC", "C-c", "C-d", "C-z", "C-l", "C-u", "C-a", "C-e", "C-r", "y", "n",
    "1", "2", "3",
}  # fmt: skip
SCROLLBACK_LINES = 200  # lines above the screen the poller keeps of a changed screen
TEXT_BYTES = 32 * 1024  # bytes of screen (and of scrollback) it keeps; lines cut at 1,024 bytes

# Started by tmux inside the sandbox: read and delete the private env file, run the agent, record its
# exit code where the poller finds it.
WRAPPER = """
id=$1; shift
env_file="$HOME/.cocoon/env/$id"
if [ -f "$env_file" ]; then . "$env_file"; rm -f "$env_file"; fi
if [ -n "${COCOON_PROMPT_STDIN:-}" ]; then printf '%s\\n' "$COCOON_PROMPT_STDIN" | "$@"; else "$@"; fi
echo $? > "/opt/cocoon/status/$id.exit"
echo "$id" | dd of=/opt/cocoon/status/.events oflag=nonblock conv=nocreat status=none 2>/dev/null
"""
# Closing an agent's session: its window first, which is also linked into the watch session (killing
# the session alone would leave it there).
CLOSE_ID = f'{{ {TMUX_LINE} kill-window -t "=$id:"; {TMUX_LINE} kill-session -t "=$id"; }} 2>/dev/null'
# The sandbox's boot: its PID 1's start time (field 22 of /proc/1/stat; the name before it may hold
# spaces). A session started before another boot was ended by a restart, not by its agent.
BOOT = "sed 's/.*) //' /proc/1/stat | cut -d' ' -f20 | tr -cd 0-9 | head -c 20"
# One exec per sandbox per poll: the sandbox's boot, then for every agent whether its program lives,
# its exit code and hook status, the foreground command and a hash of the screen; the screen and the
# lines above it only when the screen changed. Sessions stay after their program ends
# (remain-on-exit), so the final screen is read here before the session is closed. Everything it reads
# is the sandbox's: a bounded amount, never blocking on it (a FIFO), printable bytes only in the plain
# fields so that one agent's files cannot forge another agent's line.
POLL = f"""
clean() {{ tr -c '[:graph:] ' ' '; }}
small() {{ dd if="$1" bs=128 count=1 iflag=nonblock 2>/dev/null | clean; }}
text() {{ {{ "$@" | cut -c1-1024 | tail -c {TEXT_BYTES}; echo; }} | base64 -w0; }}
printf 'boot\\t%s\\n' "$({BOOT})"
for pair in "$@"; do
  id=${{pair%%=*}}; known=${{pair#*=}}
  hook=$(small "/opt/cocoon/status/$id")
  alive=0; command=; screen=; text=; above=
  # display-message answers 0 with an empty format when the session is gone but the server runs on
  # (other sessions, the watch session): only a pane_dead of 0 or 1 means the session is there.
  pane=$({TMUX_LINE} display-message -p -t "=$id:" '#{{pane_dead}} #{{pane_current_command}}' 2>/dev/null)
  if case "$pane" in [01]" "*) true ;; *) false ;; esac; then
    [ "${{pane%% *}}" = 1 ] || alive=1
    command=$(printf '%s' "${{pane#* }}" | head -c 100 | clean)
    screen=$({TMUX_LINE} capture-pane -p -t "=$id:" | md5sum | cut -c1-32)
    if [ "$screen" != "$known" ]; then
      text=$(text {TMUX_LINE} capture-pane -p -t "=$id:")
      above=$(text {TMUX_LINE} capture-pane -p -t "=$id:" -S -{SCROLLBACK_LINES} -E -1)
    fi
    [ "$alive" = 1 ] ||
      {CLOSE_ID}
  fi
  # Read after the pane: the wrapper writes it before its pane dies, so a dead pane has its code.
  code=$(small "/opt/cocoon/status/$id.exit")
  printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' \\
    "$id" "$alive" "$code" "$hook" "$command" "$screen" "$text" "$above"
done
"""
POLL_FIELDS = 8
# The same poll asked on the watcher's stream (agents.stream): run by the sandbox's tmux server
# (run-shell: one fork in the sandbox instead of an engine exec, ~64 ms of the engine's CPU each), its
# report base64 between two marker lines in a buffer that show-buffer prints as the command's answer
# (what run-shell prints itself goes to a pane's view mode, not to a control client). The script goes
# base64 too: run-shell expands #{...} formats, tmux's parser quotes, and the command is one line.
POLL_MARK = "cocoon-poll"
POLL_NONCE = re.compile(r"[0-9a-f]{1,32}")
POLL_PAIR = re.compile(r"ag_[a-z0-9]{1,36}=[0-9a-f]{0,32}")
_POLL_B64 = base64.b64encode(POLL.encode()).decode()


def stream_poll(nonce: str, pairs: list[str]) -> bytes:
    """The control-mode command line that runs POLL for these "<agent>=<screen hash>" pairs; its answer
    is "<POLL_MARK> <nonce>", POLL's report in base64 lines, "<POLL_MARK>-end <nonce>"."""
    if not POLL_NONCE.fullmatch(nonce) or not all(POLL_PAIR.fullmatch(pair) for pair in pairs):
        raise ValueError("a poll on the stream takes agent ids, screen hashes and a hex nonce only")
    buffer = f"{POLL_MARK}-{nonce}"
    job = (
        f'sh -c "$(echo {_POLL_B64} | base64 -d)" poll {" ".join(pairs)} 2>/dev/null | base64 |'
        f" {{ echo {POLL_MARK} {nonce}; cat; echo {POLL_MARK}-end {nonce}; }} |"
        f" {TMUX_LINE} load-buffer -b {buffer} - 2>/dev/null; true"
    )
    return f"run-shell '{job}' ; show-buffer -b {buffer} ; delete-buffer -b {buffer}".encode()


# The watcher's stream (agents.stream): tmux's control mode, attached to a session of its own whose one
# pane reads the events FIFO (cocoon-status and the wrapper write an agent id to it, never blocking: no
# reader, a full pipe or no FIFO just drop the line), with every agent's window linked in, so that the
# output of any agent and every hook report arrive as %output the moment they happen. (A file followed
# by `tail -F` was polled once a second: tail takes overlayfs for a remote file system.) ignore-size: the
# watcher never resizes an agent's window; pause-after: tmux stops sending a pane the watcher is slow
# to read rather than buffering it.
WATCH_SESSION = "cocoon-watch"
EVENTS = "/opt/cocoon/status/.events"
WATCH = f"""
stty -echo -onlcr 2>/dev/null
[ -p {EVENTS} ] || {{ rm -f {EVENTS}; mkfifo -m 600 {EVENTS}; }}
{TMUX_LINE} has-session -t ={WATCH_SESSION} 2>/dev/null ||
  {TMUX_LINE} new-session -d -s {WATCH_SESSION} -x 80 -y 24 "exec cat <> {EVENTS}"
exec {TMUX_LINE} -C attach -t ={WATCH_SESSION} -f ignore-size,pause-after=2
"""
# Sent on the watcher's stream: every window with the sessions it is linked into, marked so that the
# watcher finds the lines in the answer; agent windows not yet linked into the watch session are linked.
WINDOWS = "list-windows -a -F 'cocoon-window #{session_name} #{window_id} #{window_linked_sessions}'"
# ... and the pane of the watch session's own window, the one that reads the events FIFO.
EVENTS_PANE = f"display-message -p -t ={WATCH_SESSION}:^ 'cocoon-events #{{pane_id}}'"
# The sandbox's clock, then every session with when it was made (for agents.poller.sweep_sessions).
SESSIONS = (
    f"date +%s; {TMUX_LINE} list-sessions -F '#{{session_name}} #{{session_created}}' 2>/dev/null; true"
)


def close_session(agent_id: str) -> list[str]:
    """The command that closes an agent's session and removes its env file, should its wrapper not
    have read it yet (a start that failed, a session no row owns)."""
    return ["sh", "-c", f'id=$1; rm -f "$HOME/.cocoon/env/$id"; {CLOSE_ID}; true', "close", agent_id]


def run(sandbox_id: str, command: list[str], stdin: bytes | None = None) -> str:
    """command's output; a driver error with its stderr when it fails."""
    return (
        driver_of(sandbox_id)
        .exec(sandbox_id, command, stdin=stdin, timeout=30)
        .checked()
        .stdout.decode(errors="replace")
    )


FILES_FOUND = 3  # START's exit code when it found files it was to create
STDIN_END = "end"  # the last line of START's stdin
# One exec starts an agent: the private env file, the files its CLI reads (with create_only only into a
# home that has none of them: else it prints what each holds, base64 or "-", and starts nothing), its
# session with remain-on-exit, then the sandbox's boot. Stdin holds the env file and then each file,
# back to back, and a last line that says it all came (should cocoond die while it sends, nothing
# starts); $6 lists each file's "size:path", $7 is the wrapper, the command follows. The files go
# in under a temporary name and are renamed into place, so a CLI never reads half a file and a symlink
# there is replaced, not followed. Sessions get the exec's umask, not the env file's.
START = f"""
id=$1 cols=$2 rows=$3 env_size=$4 create_only=$5 files=$6 wrapper=$7; shift 7
set -f
if [ "$create_only" = 1 ]; then
  for spec in $files; do
    [ -e "$HOME/${{spec#*:}}" ] || continue
    cat > /dev/null
    for spec in $files; do
      file="$HOME/${{spec#*:}}"
      if [ -f "$file" ]; then base64 -w0 "$file"; else printf -; fi; echo
    done
    exit {FILES_FOUND}
  done
fi
env_file="$HOME/.cocoon/env/$id" staged=
# The session's window first: one linked into another session outlives kill-session.
fail() {{
  rm -f "$env_file" $staged
  {CLOSE_ID}
  exit 1
}}
mask=$(umask); umask 077
[ -d "$HOME/.cocoon/env" ] || mkdir -p "$HOME/.cocoon/env" || fail
head -c "$env_size" > "$env_file" || fail
for spec in $files; do
  file="$HOME/${{spec#*:}}"; staged="$staged $file.$id"
  [ -d "${{file%/*}}" ] || mkdir -p "${{file%/*}}" || fail
  head -c "${{spec%%:*}}" > "$file.$id" || fail
done
IFS= read -r end && [ "$end" = {STDIN_END} ] || fail
for spec in $files; do file="$HOME/${{spec#*:}}"; mv -fT "$file.$id" "$file" || fail; done
umask "$mask"
{TMUX_LINE} new-session -d -s "$id" -x "$cols" -y "$rows" sh -c "$wrapper" agent "$id" "$@" \\; \\
  set-option -w -t "=$id:" remain-on-exit on || fail
{BOOT}
"""
# What a start that failed on cocoond's side (a timeout, the engine) may have left: the env file, the session.
BOOT_VALUE = re.compile(r"[0-9]{1,20}")  # what BOOT prints


class HomeFilesFound(Exception):
    """start_session, told to write files only into a home that has none of them, found some and
    started nothing: what each file holds (None: there is none)."""

    def __init__(self, found: dict[str, bytes | None]) -> None:
        super().__init__(sorted(path for path, data in found.items() if data is not None))
        self.found = found


def start_session(
    sandbox_id: str,
    agent_id: str,
    command: list[str],
    env: dict[str, str],
    cols: int,
    rows: int,
    files: dict[str, str] | None = None,
    *,
    create_only: bool = False,
) -> str:
    """Start the agent's session running command with env, in one exec; returns the sandbox's boot ("" if
    what it printed is not one). env goes through a private env file the wrapper reads and deletes
    (never argv, never the container's environment); files (paths in the agent's home) are written
    first, with create_only only into a home that has none of them: else HomeFilesFound says what it
    has. On failure nothing is left: no env file, no session."""
    files = files or {}
    env_file = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items()).encode()
    contents = [content.encode() for content in files.values()]
    specs = " ".join(f"{len(data)}:{path}" for path, data in zip(files, contents, strict=True))
    flag = "1" if create_only else "0"
    script = ["sh", "-c", START, "start", agent_id, str(cols), str(rows), str(len(env_file)), flag, specs]
    try:
        result = driver_of(sandbox_id).exec(
            sandbox_id,
            [*script, WRAPPER, *command],
            stdin=b"".join([env_file, *contents, f"{STDIN_END}\n".encode()]),
            timeout=30,
        )
        if create_only and result.exit_code == FILES_FOUND:
            raise HomeFilesFound(_found(result, list(files)))
        boot = result.checked().stdout.decode(errors="replace").strip()
    except HomeFilesFound:
        raise  # the script started nothing
    except BaseException:
        driver_of(sandbox_id).exec(sandbox_id, close_session(agent_id), timeout=30)
        raise
    return boot if BOOT_VALUE.fullmatch(boot) else ""


def _found(result: ExecResult, paths: list[str]) -> dict[str, bytes | None]:
    """What START printed of each file in the home: a base64 line, "-" for a missing one."""
    lines = result.stdout.split(b"\n")
    if result.truncated or len(lines) != len(paths) + 1 or lines[-1]:
        raise DriverError("the sandbox answered the agent's start with something else than its files")
    try:
        return {
            path: None if line == b"-" else base64.b64decode(line, validate=True)
            for path, line in zip(paths, lines, strict=False)
        }
    except binascii.Error as error:
        raise DriverError("the sandbox answered the agent's start with a file that is not base64") from error


def capture(sandbox_id: str, agent_id: str, scrollback: int = 0) -> tuple[str, str]:
    """The agent's screen now, and scrollback lines above it when asked."""
    target = ["-t", f"={agent_id}:"]
    screen = run(sandbox_id, [*TMUX, "capture-pane", "-p", *target])
    if not scrollback:
        return screen, ""
    return screen, run(sandbox_id, [*TMUX, "capture-pane", "-p", *target, "-S", f"-{scrollback}", "-E", "-1"])
