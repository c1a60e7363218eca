"""The GitHub host cocoon pushes to and opens pull requests on: which repositories are on it, and its
REST API (httpx, with GITHUB_TOKEN from the vault; the token never reaches a sandbox)."""

import re
from typing import Any

import httpx
from django.utils.translation import gettext_lazy as _

from cocoon import config, vault
from cocoon.errors import Conflict, Unavailable

API_VERSION = "2022-11-28"
TIMEOUT_S = 30


def base_url() -> str:
    """The configured GitHub host, as repository URLs start (settings.git.githubUrl)."""
    url: str = config.get_settings()["git"]["githubUrl"]
    return url.rstrip("/")


def repository(url: str) -> tuple[str, str] | None:
    """Owner and name of a repository on the configured GitHub host; None for anything else (file
    paths, ssh, ext::, other hosts, dot segments)."""
    match = re.fullmatch(re.escape(base_url()) + r"/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url, re.ASCII)
    if not match or {match[1], match[2]} & {".", ".."}:
        return None
    return match[1], match[2]


def create_pull_request(
    owner: str, name: str, title: str, body: str, base: str, head: str, *, project: str
) -> dict[str, Any]:
    """POST /repos/{owner}/{name}/pulls with project's GITHUB_TOKEN (vault.read_secret); the pull request
    GitHub answers (number, html_url, ...)."""
    token = vault.read_secret("GITHUB_TOKEN", project)
    if not token:
        raise Conflict(_("The secret GITHUB_TOKEN is not set."))
    api = config.get_settings()["git"]["githubApiUrl"].rstrip("/")
    try:
        response = httpx.post(
            f"{api}/repos/{owner}/{name}/pulls",
            json={"title": title, "body": body, "base": base, "head": head},
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
            },
            timeout=TIMEOUT_S,
        )
    except httpx.HTTPError as error:
        raise Unavailable(details={"github": str(error)[:500]}) from error
    if response.status_code != 201:
        message = (
            response.json().get("message", "")
            if response.headers.get("content-type", "").startswith("application/json")
            else ""
        )
        raise Conflict(
            _("GitHub refused the pull request."),
            details={"status": response.status_code, "github": message[:500]},
        )
    pull_request: dict[str, Any] = response.json()
    return pull_request
