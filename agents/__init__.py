"""Agents: profiles, tmux-hosted agents and status detection (SPEC §4)."""
