"""What sandboxes tell the apps built on them, without knowing those apps (they connect in ready())."""

from django.dispatch import Signal

# Sent with sandbox= before cocoon stops a sandbox (it still runs: a last look inside is possible) and
# after the engine stopped it.
stopping = Signal()
stopped = Signal()
# Sent with node= when a node was taken in, inside the transaction that saves it (SandboxesConfig.ready()
# has its toolbox follow once that commits).
node_added = Signal()
