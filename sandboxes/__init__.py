"""Sandboxes: drivers, lifecycle and workspaces (SPEC §3, §6)."""
