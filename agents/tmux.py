"""What runs inside a sandbox for its agents: their tmux sessions (`tmux -L cocoon`), the start wrapper,
the poll script and the watcher's control-mode stream. Everything these print is the sandbox's, so
hostile: the host parses it strictly (agents.poller, agents.watch)."""

import shlex

from sandboxes.drivers import get_driver
from sandboxes.drivers.base import TMUX_SOCKET

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
  hook=$(small "/opt/cocoon/status/$id"); code=$(small "/opt/cocoon/status/$id.exit")
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
      {{ {TMUX_LINE} kill-window -t "=$id:"; {TMUX_LINE} kill-session -t "=$id"; }} 2>/dev/null
  fi
  printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' \\
    "$id" "$alive" "$code" "$hook" "$command" "$screen" "$text" "$above"
done
"""
POLL_FIELDS = 8
# The watcher's stream (agents.watch): tmux's control mode, attached to a session of its own whose one
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
# The sandbox's clock, then every session with when it was made (for agents.poller.sweep_sessions).
SESSIONS = (
    f"date +%s; {TMUX_LINE} list-sessions -F '#{{session_name}} #{{session_created}}' 2>/dev/null; true"
)


def close_session(agent_id: str) -> list[str]:
    """The command that closes an agent's session: its window first, which is also linked into the
    watch session (killing the session alone would leave it there)."""
    script = f'{{ {TMUX_LINE} kill-window -t "=$1:"; {TMUX_LINE} kill-session -t "=$1"; }} 2>/dev/null; true'
    return ["sh", "-c", script, "close", agent_id]


def run(sandbox_id: str, command: list[str], stdin: bytes | None = None) -> str:
    """command's output; a driver error with its stderr when it fails."""
    return (
        get_driver()
        .exec(sandbox_id, command, stdin=stdin, timeout=30)
        .checked()
        .stdout.decode(errors="replace")
    )


def start_session(
    sandbox_id: str, agent_id: str, command: list[str], env: dict[str, str], cols: int, rows: int
) -> str:
    """Start the agent's session running command with env (through a private env file the wrapper reads
    and deletes: never argv, never the container's environment); returns the sandbox's boot."""
    env_file = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    save_env = 'umask 077 && mkdir -p "$HOME/.cocoon/env" && cat > "$HOME/.cocoon/env/$1" && ' + BOOT
    try:
        boot = run(sandbox_id, ["sh", "-c", save_env, "env", agent_id], stdin=env_file.encode())
        session = [*TMUX, "new-session", "-d", "-s", agent_id, "-x", str(cols), "-y", str(rows)]
        session += ["sh", "-c", WRAPPER, "agent", agent_id, *command]
        # remain-on-exit: the poller reads the final screen, then closes the session.
        run(sandbox_id, [*session, ";", "set-option", "-w", "-t", f"={agent_id}:", "remain-on-exit", "on"])
    except BaseException:
        remove = ["sh", "-c", 'rm -f "$HOME/.cocoon/env/$1"', "rm", agent_id]
        get_driver().exec(sandbox_id, remove, timeout=30)
        raise
    return boot.strip()


def capture(sandbox_id: str, agent_id: str, scrollback: int = 0) -> tuple[str, str]:
    """The agent's screen now, and scrollback lines above it when asked."""
    target = ["-t", f"={agent_id}:"]
    screen = run(sandbox_id, [*TMUX, "capture-pane", "-p", *target])
    if not scrollback:
        return screen, ""
    return screen, run(sandbox_id, [*TMUX, "capture-pane", "-p", *target, "-S", f"-{scrollback}", "-E", "-1"])
