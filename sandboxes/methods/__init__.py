"""RPC methods of sandboxes; importing this package registers them."""

from sandboxes.methods import lifecycle, workspace  # noqa: F401
