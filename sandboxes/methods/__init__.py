"""RPC methods of sandboxes; importing this package registers them."""

from sandboxes.methods import engine, lifecycle, nodes, workspace  # noqa: F401
