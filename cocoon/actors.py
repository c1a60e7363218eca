from dataclasses import dataclass

from cocoon.choices import TokenScope, Visibility


@dataclass(frozen=True)
class Actor:
    """Who is calling: the token's id, name and scope."""

    token_id: str
    name: str
    scope: str
    is_authenticated = True  # what DRF's IsAuthenticated asks of request.user

    @property
    def is_admin(self) -> bool:
        return self.scope == TokenScope.ADMIN

    def may_see(self, visibility: str) -> bool:
        """The one rule for events and activity entries: admins see all, agent tokens what is theirs."""
        return self.is_admin or visibility == Visibility.AGENT

    @property
    def label(self) -> str:
        return f"{self.name} ({self.token_id})"


ENV_ACTOR = Actor(token_id="env", name="COCOON_TOKEN", scope=TokenScope.ADMIN)
# Work the server does on its own (first-run setup, scheduled clean-ups).
SYSTEM_ACTOR = Actor(token_id="system", name="cocoon", scope=TokenScope.ADMIN)
