"""Egress: allowlist proxy, policy and the credential proxy (SPEC §5)."""
