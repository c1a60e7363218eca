from dataclasses import dataclass
from typing import Any

from cocoon.choices import Role, TokenScope, Visibility


@dataclass(frozen=True)
class Ceilings:
    """The most a token may ask for, whatever the server allows (tokens.create {ceilings}; checked by
    cocoon.tenancy.within_ceilings): network modes, providers its agents get, a sandbox's CPUs and memory,
    and a budget (cost, tokens) that what it makes is carved out of (cocoon.tenancy.carving). None: no
    ceiling of that kind."""

    networks: tuple[str, ...] | None = None
    providers: tuple[str, ...] | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    budget: tuple[tuple[str, float], ...] | None = None  # {cost?, tokens?} as items: frozen

    @classmethod
    def of(cls, document: dict[str, Any]) -> "Ceilings":
        """From a token's stored ceilings (cocoon.schemas.CEILINGS)."""
        networks, providers = document.get("networks"), document.get("providers")
        return cls(
            networks=tuple(networks) if networks is not None else None,
            providers=tuple(providers) if providers is not None else None,
            cpus=document.get("cpus"),
            memory_mb=document.get("memoryMb"),
            budget=tuple(sorted(document["budget"].items())) if "budget" in document else None,
        )

    def document(self) -> dict[str, Any]:
        """As a token stores them: only the kinds it has a ceiling of."""
        kinds: dict[str, Any] = {"networks": self.networks, "providers": self.providers, "cpus": self.cpus}
        kinds |= {
            "memoryMb": self.memory_mb,
            "budget": dict(self.budget) if self.budget is not None else None,
        }
        return {
            kind: list(value) if isinstance(value, tuple) else value
            for kind, value in kinds.items()
            if value is not None
        }


@dataclass(frozen=True)
class Actor:
    """Who is calling: the token's id, name and scope, and what it may see (cocoon.tenancy): one
    project's objects (None: every project's) and, if own_only, only those it created itself."""

    token_id: str
    name: str
    scope: str
    project: str | None = None
    own_only: bool = False
    role: str = ""  # a person's in the project (cocoon.choices.Role); "" for a token: a member's rights
    user: int | None = None  # the person's (Django user's) key; None for a token
    ceilings: Ceilings = Ceilings()
    is_authenticated = True  # what DRF's IsAuthenticated asks of request.user

    @property
    def is_admin(self) -> bool:
        return self.scope == TokenScope.ADMIN

    @property
    def read_only(self) -> bool:
        """A viewer: it reads, and every method that changes something answers forbidden."""
        return self.role == Role.VIEWER

    @property
    def sees_everything(self) -> bool:
        """Bound to no project and to no creator: cocoon.tenancy hides nothing from it."""
        return self.project is None and not self.own_only

    def may_see(self, visibility: str) -> bool:
        """The one rule for events and activity entries: admins see all, agent tokens what is theirs."""
        return self.is_admin or visibility == Visibility.AGENT

    @property
    def label(self) -> str:
        return f"{self.name} ({self.token_id})"


ENV_ACTOR = Actor(token_id="env", name="COCOON_TOKEN", scope=TokenScope.ADMIN)
# Work the server does on its own (first-run setup, scheduled clean-ups).
SYSTEM_ACTOR = Actor(token_id="system", name="cocoon", scope=TokenScope.ADMIN)
