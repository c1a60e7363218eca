"""The bubblewrap driver: a sandbox is a folder, COCOON_DATA/sandboxes/<id>, and a keeper process.

The keeper is a tmux server (the one agents run in) as the only child of bwrap's PID 1 (own user, PID,
IPC, UTS, cgroup and, for network "none", net namespaces; no capabilities; the host read-only). It lives
in its own session, so it survives cocoond restarts; PID 1's host PID and start time are kept in the
sandbox folder, out of the sandbox's reach.

Every exec and terminal enters the keeper's namespaces (nsenter) and drops to the agent user before it
runs anything: tmux servers and clients, hooks and scripts all run inside the sandbox. No host process
connects to, opens or follows anything a sandbox can write (a tmux client obeys its server, and a folder
the sandbox shares with the host can be swapped for a link at any time).

When cocoond runs as root, sandboxes run as an unprivileged host user (COCOON_BWRAP_UID), so that even
the read-only view of the host grants them no more than "other" permissions. bwrap's options are passed
through a pipe (--args FD), never on a command line, and bind sources as open file descriptors.

What it cannot do (see capabilities()): images, resource limits, enforced egress.

The package: args.py (bwrap's options, entering a sandbox, dropping root), keeper.py (PID 1's record and
start), output.py (an exec's bounded output), terminal.py (the PTY), driver.py (BwrapDriver itself).
"""

from sandboxes.drivers.bwrap.driver import BwrapDriver

__all__ = ["BwrapDriver"]
