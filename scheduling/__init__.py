"""Scheduling: tasks and cron schedules (SPEC §7)."""
