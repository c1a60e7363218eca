"""Typed method stubs for cocoon.client, generated from the method registry by
`python manage.py generate`. Do not edit: a test fails when this file and the registry differ.
"""

from typing import Any


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class Methods:
    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def activity_list(
        self,
        *,
        limit: int | None = None,
        before: int | None = None,
        sandbox_id: str | None = None,
        agent_id: str | None = None,
    ) -> Any:
        """The activity log, newest first, rendered in the caller's language."""
        return self.call(
            "activity.list",
            _params({"limit": limit, "before": before, "sandboxId": sandbox_id, "agentId": agent_id}),
        )

    def activity_prune(self, *, older_than_days: int | None = None) -> Any:
        """Queue removal of activity entries older than olderThanDays (default: the retention)."""
        return self.call("activity.prune", _params({"olderThanDays": older_than_days}))

    def agent_explain(self, *, agent_id: str) -> Any:
        """Why the agent has its status: the rule that decided (hook report, foreground process, question on screen, working indicator, start-up grace, quiet screen ...) and what the last poll saw."""
        return self.call("agent.explain", _params({"agentId": agent_id}))

    def agent_get(self, *, agent_id: str) -> Any:
        """One agent."""
        return self.call("agent.get", _params({"agentId": agent_id}))

    def agent_kill(self, *, agent_id: str) -> Any:
        """End the agent's tmux session."""
        return self.call("agent.kill", _params({"agentId": agent_id}))

    def agent_list(self, *, sandbox_id: str | None = None, status: list | None = None) -> Any:
        """Agents, optionally of one sandbox and only in some statuses."""
        return self.call("agent.list", _params({"sandboxId": sandbox_id, "status": status}))

    def agent_read(self, *, agent_id: str, scrollback: int | None = None) -> Any:
        """The agent's screen as text, and scrollback lines when asked. Of an agent that is gone: the last screen cocoon kept (lastKnown, capturedAt), with at most 200 lines of scrollback."""
        return self.call("agent.read", _params({"agentId": agent_id, "scrollback": scrollback}))

    def agent_rename(self, *, agent_id: str, name: str) -> Any:
        """Give an agent another name; its id stays the same."""
        return self.call("agent.rename", _params({"agentId": agent_id, "name": name}))

    def agent_send_input(self, *, agent_id: str, text: str, enter: bool | None = None) -> Any:
        """Type text into the agent's terminal, followed by Enter unless enter is false."""
        return self.call("agent.send_input", _params({"agentId": agent_id, "text": text, "enter": enter}))

    def agent_send_keys(self, *, agent_id: str, keys: list) -> Any:
        """Press named keys: Enter, Escape, Tab, Up, Down, C-c, y, n, ..."""
        return self.call("agent.send_keys", _params({"agentId": agent_id, "keys": keys}))

    def agent_spawn(
        self,
        *,
        sandbox_id: str,
        profile: str,
        name: str | None = None,
        prompt: str | None = None,
        env: dict | None = None,
        providers: list | None = None,
        model: str | None = None,
        cols: int | None = None,
        rows: int | None = None,
        budget: dict | None = None,
        steering: dict | None = None,
    ) -> Any:
        """Start an agent (profile: claude-code, codex, shell, ...) in a tmux session of a running sandbox, optionally with a first prompt, providers and a model. Secrets of the profile reach it through a private env file; behind the credential proxy, provider keys only as placeholders. steering: the agent gets its own token (COCOON_URL, COCOON_TOKEN) that creates and sees only its own sandboxes, within these ceilings and never beyond its parent's (no wider network than its sandbox's, only its providers, no more CPUs or memory than its sandbox), its budget carved out of the spawner's if the spawner's token has a budget ceiling; the token ends with the agent."""
        return self.call(
            "agent.spawn",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "profile": profile,
                    "name": name,
                    "prompt": prompt,
                    "env": env,
                    "providers": providers,
                    "model": model,
                    "cols": cols,
                    "rows": rows,
                    "budget": budget,
                    "steering": steering,
                }
            ),
        )

    def agent_wait(self, *, agent_id: str, until: list, timeout_s: float) -> Any:
        """Block (bounded by timeoutS) until the agent reaches one of the statuses."""
        return self.call("agent.wait", _params({"agentId": agent_id, "until": until, "timeoutS": timeout_s}))

    def attention_ack(self, *, item_id: str) -> Any:
        """Acknowledge an item: no more notifications of it; it stays (acked) until its cause goes away."""
        return self.call("attention.ack", _params({"itemId": item_id}))

    def attention_get(self, *, item_id: str) -> Any:
        """One item, in any state."""
        return self.call("attention.get", _params({"itemId": item_id}))

    def attention_list(
        self, *, state: str | None = None, sandbox_id: str | None = None, limit: int | None = None
    ) -> Any:
        """What waits for a human, newest first: agents blocked (with their question), done or ended unexpectedly, tasks in review or failed, schedules that could not start a run, the setup checklist. state open (default; snoozed items once their time has come), acked, or all (closed too)."""
        return self.call("attention.list", _params({"state": state, "sandboxId": sandbox_id, "limit": limit}))

    def attention_snooze(self, *, item_id: str, minutes: int) -> Any:
        """Hide an open item for some minutes; then it is open again and sent to the channels once more."""
        return self.call("attention.snooze", _params({"itemId": item_id, "minutes": minutes}))

    def egress_allow(self, *, host: str, sandbox_id: str | None = None) -> Any:
        """Allow a host (the one-click allow of a denied attempt): for every sandbox, or only for sandboxId. Takes effect at once, without restarting anything."""
        return self.call("egress.allow", _params({"host": host, "sandboxId": sandbox_id}))

    def egress_denied(self, *, sandbox_id: str | None = None, limit: int | None = None) -> Any:
        """Recent attempts the egress proxy refused (per sandbox, host, port and reason, counted)."""
        return self.call("egress.denied", _params({"sandboxId": sandbox_id, "limit": limit}))

    def egress_set_fence(self) -> Any:
        """Set the open sandboxes' fence (no host, no private networks) on every node that answers again. The setup checklist's fix for a fence not in force."""
        return self.call("egress.set_fence", _params({}))

    def egress_start_proxy(self) -> Any:
        """Build the egress proxy's image if needed and start (or replace) its container; answers egress.status. The setup checklist's fix for a proxy that is down."""
        return self.call("egress.start_proxy", _params({}))

    def egress_status(self) -> Any:
        """The egress proxy: whether it runs, its policy version and the version it has loaded, and whether this driver enforces egress at all; nodes: the same of each remote node's own proxy."""
        return self.call("egress.status", _params({}))

    def engine_adopt(self, *, sandbox_id: str, name: str | None = None) -> Any:
        """Make a sandbox another data directory left this one's, workspace and all: it is listed and works like any other from then on (its old agents are not adopted)."""
        return self.call("engine.adopt", _params({"sandboxId": sandbox_id, "name": name}))

    def engine_foreign(self) -> Any:
        """Sandboxes another data directory left on the engines under this instance's name."""
        return self.call("engine.foreign", _params({}))

    def engine_remove(self, *, sandbox_id: str) -> Any:
        """Remove what another data directory left of a sandbox: its container, workspace and network."""
        return self.call("engine.remove", _params({"sandboxId": sandbox_id}))

    def files_delete(self, *, sandbox_id: str, path: str, recursive: bool | None = None) -> Any:
        """Delete a file, a symlink (not its target) or a folder (recursive for a non-empty one)."""
        return self.call(
            "files.delete", _params({"sandboxId": sandbox_id, "path": path, "recursive": recursive})
        )

    def files_list(self, *, sandbox_id: str, path: str, recursive: bool | None = None) -> Any:
        """Entries of a folder in the sandbox (relative paths are taken from /workspace)."""
        return self.call(
            "files.list", _params({"sandboxId": sandbox_id, "path": path, "recursive": recursive})
        )

    def files_mkdir(self, *, sandbox_id: str, path: str) -> Any:
        """Create a folder (and its parents)."""
        return self.call("files.mkdir", _params({"sandboxId": sandbox_id, "path": path}))

    def files_read(self, *, sandbox_id: str, path: str, encoding: str | None = None) -> Any:
        """A file's content: UTF-8 text, or base64 for binary files (or when asked)."""
        return self.call("files.read", _params({"sandboxId": sandbox_id, "path": path, "encoding": encoding}))

    def files_write(self, *, sandbox_id: str, path: str, content: str, encoding: str | None = None) -> Any:
        """Create or replace a file (content as UTF-8 text or base64)."""
        return self.call(
            "files.write",
            _params({"sandboxId": sandbox_id, "path": path, "content": content, "encoding": encoding}),
        )

    def git_commit(
        self, *, sandbox_id: str, message: str, paths: list | None = None, author: str | None = None
    ) -> Any:
        """Commit all changes (or the given paths); author as "Name <email>"."""
        return self.call(
            "git.commit",
            _params({"sandboxId": sandbox_id, "message": message, "paths": paths, "author": author}),
        )

    def git_create_pr(
        self,
        *,
        sandbox_id: str,
        title: str,
        base: str,
        head: str,
        body: str | None = None,
        remote: str | None = None,
    ) -> Any:
        """Open a GitHub pull request for the workspace's origin repository."""
        return self.call(
            "git.create_pr",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "title": title,
                    "body": body,
                    "base": base,
                    "head": head,
                    "remote": remote,
                }
            ),
        )

    def git_push(self, *, sandbox_id: str, branch: str, remote: str | None = None) -> Any:
        """Push HEAD to a branch of a remote (default origin) on the configured GitHub host. The commits leave the sandbox as a bundle that cocoond verifies and pushes itself: GITHUB_TOKEN never enters the sandbox."""
        return self.call("git.push", _params({"sandboxId": sandbox_id, "branch": branch, "remote": remote}))

    def git_set_remote(self, *, sandbox_id: str, url: str, remote: str | None = None) -> Any:
        """Point a remote of the workspace (default origin) at a repository on the configured GitHub host, adding it if the workspace has none: where git.push and git.create_pr go."""
        return self.call("git.set_remote", _params({"sandboxId": sandbox_id, "url": url, "remote": remote}))

    def git_status(self, *, sandbox_id: str) -> Any:
        """Branch, ahead/behind and changed files of the workspace."""
        return self.call("git.status", _params({"sandboxId": sandbox_id}))

    def image_build(self, *, variant: str | None = None) -> Any:
        """Build a sandbox image variant in the background; progress arrives as image.build events. One build of a variant at a time: while one runs, the call queues nothing (queued false, running true)."""
        return self.call("image.build", _params({"variant": variant}))

    def image_status(self) -> Any:
        """The sandbox image variants and whether they are built."""
        return self.call("image.status", _params({}))

    def node_add(
        self,
        *,
        name: str,
        url: str,
        tls: dict | None = None,
        labels: dict | None = None,
        capacity: dict | None = None,
    ) -> Any:
        """Take in a Docker engine on another host: tcp://host:port with mutual TLS (tls: the CA its certificate comes from, pinned; cocoon's client certificate and key, which goes to the vault). The engine must answer (its version, runtimes and live-restore are read) and be no node yet; nothing is kept when it does not. New sandboxes may go there at once, in every network mode (the node gets an egress proxy of its own); the toolbox follows in the background."""
        return self.call(
            "node.add",
            _params({"name": name, "url": url, "tls": tls, "labels": labels, "capacity": capacity}),
        )

    def node_drain(self, *, node_id: str, stop: bool | None = None, undrain: bool | None = None) -> Any:
        """No new sandboxes on the node (undrain: ready again); with stop, its sandboxes are stopped too. Sandboxes there keep running otherwise."""
        return self.call("node.drain", _params({"nodeId": node_id, "stop": stop, "undrain": undrain}))

    def node_get(self, *, node_id: str) -> Any:
        """One node."""
        return self.call("node.get", _params({"nodeId": node_id}))

    def node_list(self) -> Any:
        """The nodes sandboxes run on, the local one first."""
        return self.call("node.list", _params({}))

    def node_remove(self, *, node_id: str) -> Any:
        """Forget a node that holds no sandboxes (drained first; its client key leaves the vault; every object of this instance on its engine, its egress proxy, networks, the toolbox volume and what is left of sandboxes, is removed if its last check answered). The local node stays."""
        return self.call("node.remove", _params({"nodeId": node_id}))

    def node_update(self, *, node_id: str, labels: dict | None = None, capacity: dict | None = None) -> Any:
        """Change a node's labels or its capacity (what is given replaces what was read from the engine)."""
        return self.call("node.update", _params({"nodeId": node_id, "labels": labels, "capacity": capacity}))

    def notifications_deliveries(
        self,
        *,
        item_id: str | None = None,
        channel: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> Any:
        """The delivery log: each item sent (or to be sent) to each channel, newest first, with its attempts and last error."""
        return self.call(
            "notifications.deliveries",
            _params({"itemId": item_id, "channel": channel, "state": state, "limit": limit}),
        )

    def notifications_test(self, *, channel: str) -> Any:
        """Send a test message to a channel of settings notifications.channels now."""
        return self.call("notifications.test", _params({"channel": channel}))

    def profile_create(
        self,
        *,
        name: str,
        command: list,
        prompt_mode: str | None = None,
        env: dict | None = None,
        secrets: list | None = None,
        hooks: bool | None = None,
        working_pattern: str | None = None,
        blocked_patterns: list | None = None,
        default_model: str | None = None,
        resume_command: list | None = None,
        resume_session_command: list | None = None,
        answers: list | None = None,
    ) -> Any:
        """Create a custom agent profile."""
        return self.call(
            "profile.create",
            _params(
                {
                    "name": name,
                    "command": command,
                    "promptMode": prompt_mode,
                    "env": env,
                    "secrets": secrets,
                    "hooks": hooks,
                    "workingPattern": working_pattern,
                    "blockedPatterns": blocked_patterns,
                    "defaultModel": default_model,
                    "resumeCommand": resume_command,
                    "resumeSessionCommand": resume_session_command,
                    "answers": answers,
                }
            ),
        )

    def profile_delete(self, *, name: str) -> Any:
        """Delete a custom agent profile no running agent uses."""
        return self.call("profile.delete", _params({"name": name}))

    def profile_get(self, *, name: str) -> Any:
        """One agent profile."""
        return self.call("profile.get", _params({"name": name}))

    def profile_list(self) -> Any:
        """Agent profiles: the built-ins (claude-code, codex, shell) and custom ones; providerMissing: its CLI needs an LLM provider and none has its key (a spawn's agent could not log in)."""
        return self.call("profile.list", _params({}))

    def profile_reset(self, *, name: str) -> Any:
        """Reset a built-in agent profile to its built-in definition."""
        return self.call("profile.reset", _params({"name": name}))

    def profile_update(
        self,
        *,
        name: str,
        command: list | None = None,
        prompt_mode: str | None = None,
        env: dict | None = None,
        secrets: list | None = None,
        hooks: bool | None = None,
        working_pattern: str | None = None,
        blocked_patterns: list | None = None,
        default_model: str | None = None,
        resume_command: list | None = None,
        resume_session_command: list | None = None,
        answers: list | None = None,
    ) -> Any:
        """Change fields of an agent profile (built-in or custom); returns the whole profile."""
        return self.call(
            "profile.update",
            _params(
                {
                    "name": name,
                    "command": command,
                    "promptMode": prompt_mode,
                    "env": env,
                    "secrets": secrets,
                    "hooks": hooks,
                    "workingPattern": working_pattern,
                    "blockedPatterns": blocked_patterns,
                    "defaultModel": default_model,
                    "resumeCommand": resume_command,
                    "resumeSessionCommand": resume_session_command,
                    "answers": answers,
                }
            ),
        )

    def projects_create(
        self, *, id: str, name: str, quotas: dict | None = None, server_secrets: bool | None = None
    ) -> Any:
        """Create a project: it owns the sandboxes (and their agents) made by its agent tokens."""
        return self.call(
            "projects.create",
            _params({"id": id, "name": name, "quotas": quotas, "serverSecrets": server_secrets}),
        )

    def projects_create_token(
        self,
        *,
        project: str,
        name: str,
        expires_in_days: int | None = None,
        sandboxes: str | None = None,
        ceilings: dict | None = None,
    ) -> Any:
        """Create an agent token of a project (for a CI job, a bot, a steering agent outside cocoon): it acts in that project alone, on all its sandboxes or only those it makes, within its ceilings. The plain token is in this answer only. For admins and the project's owners."""
        return self.call(
            "projects.create_token",
            _params(
                {
                    "project": project,
                    "name": name,
                    "expiresInDays": expires_in_days,
                    "sandboxes": sandboxes,
                    "ceilings": ceilings,
                }
            ),
        )

    def projects_delete_secret(self, *, project: str, name: str) -> Any:
        """Delete a project's own secret: its sandboxes get the server's of that name again where the project may use them, else none. For admins and the project's owners."""
        return self.call("projects.delete_secret", _params({"project": project, "name": name}))

    def projects_invite(self, *, project: str, role: str, expires_in_hours: int | None = None) -> Any:
        """A one-time link that makes whoever opens it (logging in, or signing up where password login is on) a member of the project in role; valid for expiresInHours (default 72). The link is in this answer only. For admins and the project's owners."""
        return self.call(
            "projects.invite", _params({"project": project, "role": role, "expiresInHours": expires_in_hours})
        )

    def projects_invites(self, *, project: str) -> Any:
        """A project's invitations not used yet and not expired (without their links)."""
        return self.call("projects.invites", _params({"project": project}))

    def projects_list(self) -> Any:
        """The projects the caller may see: all for an admin, else its own."""
        return self.call("projects.list", _params({}))

    def projects_members(self, *, project: str) -> Any:
        """The people of a project and their roles."""
        return self.call("projects.members", _params({"project": project}))

    def projects_remove_member(self, *, project: str, user: str) -> Any:
        """Take a person out of a project; their open sessions end at once. For admins and owners."""
        return self.call("projects.remove_member", _params({"project": project, "user": user}))

    def projects_revoke_invite(self, *, project: str, invite_id: str) -> Any:
        """Revoke an invitation not used yet: its link opens nothing any more."""
        return self.call("projects.revoke_invite", _params({"project": project, "inviteId": invite_id}))

    def projects_revoke_token(self, *, project: str, token_id: str) -> Any:
        """Revoke one of a project's own tokens (and the steering agents' tokens made below it); it stops working at once. For admins and the project's owners."""
        return self.call("projects.revoke_token", _params({"project": project, "tokenId": token_id}))

    def projects_secrets(self, *, project: str) -> Any:
        """The names of a project's own secrets (values are never returned). For its sandboxes they stand before the server's of the same name; the server's are used only where an admin lets the project (serverSecrets). For admins and the project's owners."""
        return self.call("projects.secrets", _params({"project": project}))

    def projects_set_member(self, *, project: str, user: str, role: str, quotas: dict | None = None) -> Any:
        """Make a person (a Django user) a member of a project, or give them another role: owner, member, viewer, and their share of its quotas (quotas: what the sandboxes they make may take at once, and the agents in them; left out: as it was). Their open sessions end at once and open again with the new rights. For admins and the project's owners."""
        return self.call(
            "projects.set_member", _params({"project": project, "user": user, "role": role, "quotas": quotas})
        )

    def projects_set_secret(self, *, project: str, name: str, value: str) -> Any:
        """Create or replace a project's own secret (its ANTHROPIC_API_KEY, GITHUB_TOKEN, a provider's key): encrypted at rest, never returned, used for the project's sandboxes only. For admins and the project's owners."""
        return self.call("projects.set_secret", _params({"project": project, "name": name, "value": value}))

    def projects_tokens(self, *, project: str) -> Any:
        """A project's own tokens (its agent tokens, steering agents' among them; a person's own are theirs), without their values. For admins and the project's owners."""
        return self.call("projects.tokens", _params({"project": project}))

    def projects_update(
        self,
        *,
        id: str,
        name: str | None = None,
        quotas: dict | None = None,
        server_secrets: bool | None = None,
    ) -> Any:
        """Rename a project or set its quotas (the whole set: a quota left out has no limit). Past a quota a create, start or spawn answers quota_exceeded; what runs already is left running."""
        return self.call(
            "projects.update",
            _params({"id": id, "name": name, "quotas": quotas, "serverSecrets": server_secrets}),
        )

    def providers_list(self) -> Any:
        """Model providers: the built-in anthropic and openai plus settings.providers, and whether each one's secret is set (never the value)."""
        return self.call("providers.list", _params({}))

    def providers_test(
        self, *, provider_id: str | None = None, provider: dict | None = None, key: str | None = None
    ) -> Any:
        """Check a provider from the server: reachability, auth and its model list. Give providerId for a saved one, or provider (and key) for input not saved yet."""
        return self.call(
            "providers.test", _params({"providerId": provider_id, "provider": provider, "key": key})
        )

    def sandbox_apply_patch(
        self, *, sandbox_id: str, patch: str, check: bool | None = None, three_way: bool | None = None
    ) -> Any:
        """Apply a git patch in the workspace (all or nothing unless threeWay); check only validates."""
        return self.call(
            "sandbox.apply_patch",
            _params({"sandboxId": sandbox_id, "patch": patch, "check": check, "threeWay": three_way}),
        )

    def sandbox_create(
        self,
        *,
        name: str | None = None,
        image: str | None = None,
        repo: str | None = None,
        branch: str | None = None,
        network: str | None = None,
        limits: dict | None = None,
        runtime: str | None = None,
        pool: bool | None = None,
        budget: dict | None = None,
        node: str | None = None,
        node_labels: dict | None = None,
        project: str | None = None,
    ) -> Any:
        """Create a hardened sandbox with a git workspace (empty or cloned from repo), tagged cocoon-baseline. Unset fields take the settings' sandbox defaults. Claims a started sandbox from the warm pool of these options when there is one (fromPool), unless pool is false."""
        return self.call(
            "sandbox.create",
            _params(
                {
                    "name": name,
                    "image": image,
                    "repo": repo,
                    "branch": branch,
                    "network": network,
                    "limits": limits,
                    "runtime": runtime,
                    "pool": pool,
                    "budget": budget,
                    "node": node,
                    "nodeLabels": node_labels,
                    "project": project,
                }
            ),
        )

    def sandbox_delete(self, *, sandbox_id: str) -> Any:
        """Delete a sandbox with its workspace."""
        return self.call("sandbox.delete", _params({"sandboxId": sandbox_id}))

    def sandbox_diff(self, *, sandbox_id: str, paths: list | None = None) -> Any:
        """The workspace as a git patch against cocoon-baseline (new, deleted, renamed, binary files and modes) with a per-file summary; it applies with `git apply` to the baseline."""
        return self.call("sandbox.diff", _params({"sandboxId": sandbox_id, "paths": paths}))

    def sandbox_exec(
        self,
        *,
        sandbox_id: str,
        command: list,
        cwd: str | None = None,
        env: dict | None = None,
        stdin: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Run a command (argv) in a running sandbox as its agent user; answers exit code and output."""
        return self.call(
            "sandbox.exec",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "command": command,
                    "cwd": cwd,
                    "env": env,
                    "stdin": stdin,
                    "timeoutS": timeout_s,
                }
            ),
        )

    def sandbox_get(self, *, sandbox_id: str) -> Any:
        """One sandbox."""
        return self.call("sandbox.get", _params({"sandboxId": sandbox_id}))

    def sandbox_list(self) -> Any:
        """The sandboxes the caller may see (its project's), newest first."""
        return self.call("sandbox.list", _params({}))

    def sandbox_rename(self, *, sandbox_id: str, name: str) -> Any:
        """Give a sandbox another name (unique); its id stays the same."""
        return self.call("sandbox.rename", _params({"sandboxId": sandbox_id, "name": name}))

    def sandbox_start(self, *, sandbox_id: str) -> Any:
        """Start a stopped sandbox."""
        return self.call("sandbox.start", _params({"sandboxId": sandbox_id}))

    def sandbox_stop(self, *, sandbox_id: str) -> Any:
        """Stop a sandbox; its files are kept."""
        return self.call("sandbox.stop", _params({"sandboxId": sandbox_id}))

    def schedule_create(
        self,
        *,
        name: str,
        cron: str,
        template: dict,
        timezone: str | None = None,
        overlap: str | None = None,
        keep_runs: int | None = None,
        enabled: bool | None = None,
    ) -> Any:
        """Create a schedule: a cron expression (5 fields or @daily, ...) in a timezone (default UTC) that creates and starts a task from template when due. overlap: skip (default: nothing starts while a run is queued or running), queue or parallel. keepRuns finished runs are kept (default 10); older ones are deleted with their sandboxes."""
        return self.call(
            "schedule.create",
            _params(
                {
                    "name": name,
                    "cron": cron,
                    "timezone": timezone,
                    "template": template,
                    "overlap": overlap,
                    "keepRuns": keep_runs,
                    "enabled": enabled,
                }
            ),
        )

    def schedule_delete(self, *, schedule_id: str) -> Any:
        """Delete a schedule; its runs stay as tasks."""
        return self.call("schedule.delete", _params({"scheduleId": schedule_id}))

    def schedule_get(self, *, schedule_id: str) -> Any:
        """One schedule."""
        return self.call("schedule.get", _params({"scheduleId": schedule_id}))

    def schedule_list(self) -> Any:
        """All schedules, by name."""
        return self.call("schedule.list", _params({}))

    def schedule_preview(
        self,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        schedule_id: str | None = None,
        count: int | None = None,
        after: str | None = None,
    ) -> Any:
        """The next times of a cron expression in a timezone, for unsaved input (cron, timezone) or a saved schedule (scheduleId); after defaults to now."""
        return self.call(
            "schedule.preview",
            _params(
                {
                    "cron": cron,
                    "timezone": timezone,
                    "scheduleId": schedule_id,
                    "count": count,
                    "after": after,
                }
            ),
        )

    def schedule_run(self, *, schedule_id: str) -> Any:
        """Run a schedule now, outside its cron times (conflict for overlap: skip with a run open)."""
        return self.call("schedule.run", _params({"scheduleId": schedule_id}))

    def schedule_update(
        self,
        *,
        schedule_id: str,
        name: str | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        template: dict | None = None,
        overlap: str | None = None,
        keep_runs: int | None = None,
        enabled: bool | None = None,
    ) -> Any:
        """Change fields of a schedule; a new cron, timezone or enabled recomputes nextRunAt."""
        return self.call(
            "schedule.update",
            _params(
                {
                    "scheduleId": schedule_id,
                    "name": name,
                    "cron": cron,
                    "timezone": timezone,
                    "template": template,
                    "overlap": overlap,
                    "keepRuns": keep_runs,
                    "enabled": enabled,
                }
            ),
        )

    def secrets_delete(self, *, name: str) -> Any:
        """Delete a secret."""
        return self.call("secrets.delete", _params({"name": name}))

    def secrets_list(self) -> Any:
        """Names and timestamps of all secrets; values are never returned."""
        return self.call("secrets.list", _params({}))

    def secrets_set(self, *, name: str, value: str) -> Any:
        """Create or replace a secret. The value is encrypted at rest and never returned."""
        return self.call("secrets.set", _params({"name": name, "value": value}))

    def settings_get(self) -> Any:
        """The whole settings document."""
        return self.call("settings.get", _params({}))

    def settings_reset(self, *, keys: list | None = None) -> Any:
        """Reset the given dotted setting paths (or everything) to their defaults."""
        return self.call("settings.reset", _params({"keys": keys}))

    def settings_update(
        self,
        *,
        general: dict | None = None,
        sandbox: dict | None = None,
        egress: dict | None = None,
        providers: dict | None = None,
        secrets: dict | None = None,
        security: dict | None = None,
        agents: dict | None = None,
        tasks: dict | None = None,
        git: dict | None = None,
        toolbox: dict | None = None,
        usage: dict | None = None,
        notifications: dict | None = None,
    ) -> Any:
        """Deep-merge a partial settings document; returns the whole validated document."""
        return self.call(
            "settings.update",
            _params(
                {
                    "general": general,
                    "sandbox": sandbox,
                    "egress": egress,
                    "providers": providers,
                    "secrets": secrets,
                    "security": security,
                    "agents": agents,
                    "tasks": tasks,
                    "git": git,
                    "toolbox": toolbox,
                    "usage": usage,
                    "notifications": notifications,
                }
            ),
        )

    def system_info(self) -> Any:
        """Server version, sandbox driver kind, its capabilities and runtimes, and the warm pools' members (ready, starting)."""
        return self.call("system.info", _params({}))

    def system_methods(self) -> Any:
        """The method catalogue with JSON Schemas, limited to what the calling token may call."""
        return self.call("system.methods", _params({}))

    def system_setup_status(self) -> Any:
        """The first-run checklist (admin token, network, proxy, image, toolbox), translated."""
        return self.call("system.setup_status", _params({}))

    def task_approve(
        self, *, task_id: str, push: dict | None = None, pull_request: dict | None = None
    ) -> Any:
        """Accept a task in review: done, its own sandbox removed (the diff stays with the task). With push, the changes are committed and pushed to a branch (default cocoon/<taskId>) first; with pullRequest, a GitHub pull request is opened from that branch too."""
        return self.call(
            "task.approve", _params({"taskId": task_id, "push": push, "pullRequest": pull_request})
        )

    def task_cancel(self, *, task_id: str) -> Any:
        """Cancel a queued or running task (its running agent is stopped; its own sandbox stays for settings.tasks.keepFailedSandboxHours)."""
        return self.call("task.cancel", _params({"taskId": task_id}))

    def task_create(
        self,
        *,
        prompt: str,
        title: str | None = None,
        sandbox_id: str | None = None,
        sandbox: dict | None = None,
        workflow: list | None = None,
        budget: dict | None = None,
    ) -> Any:
        """Create a task and start it at once. A task: prompt, a new sandbox (sandbox: sandbox.create fields) or an existing one (sandboxId), and a workflow of steps run one after another, each an agent (profile) with a prompt template ({{prompt}}, {{taskId}}, {{reportFile}}, {{workdir}}, {{step}}, {{reportInstructions}}) and a timeout (default: one claude-code step). The last agent writes a JSON report {ok, summary, autoClose, details?} to $COCOON_REPORT_FILE (<workdir>/.cocoon/report/<taskId>.json): ok + autoClose -> done and the task's own sandbox removed (its diff kept); otherwise review."""
        return self.call(
            "task.create",
            _params(
                {
                    "prompt": prompt,
                    "title": title,
                    "sandboxId": sandbox_id,
                    "sandbox": sandbox,
                    "workflow": workflow,
                    "budget": budget,
                }
            ),
        )

    def task_get(self, *, task_id: str) -> Any:
        """One task with its steps, report and diff."""
        return self.call("task.get", _params({"taskId": task_id}))

    def task_list(
        self, *, status: list | None = None, schedule_id: str | None = None, limit: int | None = None
    ) -> Any:
        """Tasks, newest first (without patches: task.get has them)."""
        return self.call("task.list", _params({"status": status, "scheduleId": schedule_id, "limit": limit}))

    def task_reject(self, *, task_id: str) -> Any:
        """Close a task in review without its changes (cancelled; its sandbox stays for a look)."""
        return self.call("task.reject", _params({"taskId": task_id}))

    def task_retry(self, *, task_id: str) -> Any:
        """Queue a failed task again from its failed step (that step's agent is started anew; the steps before stay done). When its own sandbox was removed meanwhile (settings.tasks.keepFailedSandboxHours), it starts over from the first step in a new one."""
        return self.call("task.retry", _params({"taskId": task_id}))

    def tokens_create(
        self,
        *,
        name: str,
        scope: str,
        project: str | None = None,
        expires_in_days: int | None = None,
        sandboxes: str | None = None,
        ceilings: dict | None = None,
    ) -> Any:
        """Create a token. The plain token is in this answer only; it is never shown again. An agent token may carry ceilings: network modes, providers, a sandbox's CPUs and memory, and a budget that each sandbox, task or steering agent it makes gets its own out of (ceiling_exceeded past them)."""
        return self.call(
            "tokens.create",
            _params(
                {
                    "scope": scope,
                    "project": project,
                    "name": name,
                    "expiresInDays": expires_in_days,
                    "sandboxes": sandboxes,
                    "ceilings": ceilings,
                }
            ),
        )

    def tokens_create_own(self, *, name: str, expires_in_days: int | None = None) -> Any:
        """Create a token of the calling person's own, for their scripts: it acts as they do at each call (their role, in the project their session works in), and stops once they are deactivated. The plain token is in this answer only."""
        return self.call("tokens.create_own", _params({"name": name, "expiresInDays": expires_in_days}))

    def tokens_list(self) -> Any:
        """All API tokens (without their values)."""
        return self.call("tokens.list", _params({}))

    def tokens_mine(self) -> Any:
        """The calling person's own tokens (user scope), without their values."""
        return self.call("tokens.mine", _params({}))

    def tokens_revoke(self, *, token_id: str) -> Any:
        """Revoke a token; it stops working at once."""
        return self.call("tokens.revoke", _params({"tokenId": token_id}))

    def tokens_revoke_own(self, *, token_id: str) -> Any:
        """Revoke one of the calling person's own tokens; it stops working at once."""
        return self.call("tokens.revoke_own", _params({"tokenId": token_id}))

    def toolbox_install(self) -> Any:
        """Install or update the agent toolbox in the background (no image rebuild); progress arrives as toolbox.install events. One at a time: while one runs, the call queues nothing (queued false, running true) and that install's events tell."""
        return self.call("toolbox.install", _params({}))

    def toolbox_status(self) -> Any:
        """Whether the agent toolbox (/opt/agents) is installed, and its package versions."""
        return self.call("toolbox.status", _params({}))

    def usage_budgets(self, *, state: str | None = None) -> Any:
        """Every budget as last judged after an ingest: its scope (agent, task, sandbox, day), what it allows, what was spent, and its state (ok; warned: settings usage.notifyAt of it spent; exceeded: requests refused)."""
        return self.call("usage.budgets", _params({"state": state}))

    def usage_records(
        self,
        *,
        sandbox_id: str | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        schedule_id: str | None = None,
        from_: str | None = None,
        to: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Any:
        """LLM requests of agents as the credential proxy metered them (model, tokens read from the provider's answer, cost by settings usage.prices), newest first; filters sandboxId, agentId, taskId, scheduleId, from, to; pass next as cursor for the page after."""
        return self.call(
            "usage.records",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "agentId": agent_id,
                    "taskId": task_id,
                    "scheduleId": schedule_id,
                    "from": from_,
                    "to": to,
                    "limit": limit,
                    "cursor": cursor,
                }
            ),
        )

    def usage_set_budget(
        self,
        *,
        budget: Any,
        agent_id: str | None = None,
        task_id: str | None = None,
        sandbox_id: str | None = None,
    ) -> Any:
        """Set an agent's, a task's or a sandbox's budget ({cost?, tokens?, onSpent?}; null removes it) and judge it at once: raised past what was spent, its requests pass the credential proxy again as soon as it has loaded the new policy (this call waits for that)."""
        return self.call(
            "usage.set_budget",
            _params({"agentId": agent_id, "taskId": task_id, "sandboxId": sandbox_id, "budget": budget}),
        )

    def usage_summary(
        self,
        *,
        group_by: str,
        sandbox_id: str | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        schedule_id: str | None = None,
        from_: str | None = None,
        to: str | None = None,
    ) -> Any:
        """Requests, tokens and cost summed per agent, sandbox, task, schedule, model, provider or day (most cost first; days in order), and over all; the same filters as usage.records."""
        return self.call(
            "usage.summary",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "agentId": agent_id,
                    "taskId": task_id,
                    "scheduleId": schedule_id,
                    "from": from_,
                    "to": to,
                    "groupBy": group_by,
                }
            ),
        )


class AsyncMethods:
    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError

    async def activity_list(
        self,
        *,
        limit: int | None = None,
        before: int | None = None,
        sandbox_id: str | None = None,
        agent_id: str | None = None,
    ) -> Any:
        """The activity log, newest first, rendered in the caller's language."""
        return await self.call(
            "activity.list",
            _params({"limit": limit, "before": before, "sandboxId": sandbox_id, "agentId": agent_id}),
        )

    async def activity_prune(self, *, older_than_days: int | None = None) -> Any:
        """Queue removal of activity entries older than olderThanDays (default: the retention)."""
        return await self.call("activity.prune", _params({"olderThanDays": older_than_days}))

    async def agent_explain(self, *, agent_id: str) -> Any:
        """Why the agent has its status: the rule that decided (hook report, foreground process, question on screen, working indicator, start-up grace, quiet screen ...) and what the last poll saw."""
        return await self.call("agent.explain", _params({"agentId": agent_id}))

    async def agent_get(self, *, agent_id: str) -> Any:
        """One agent."""
        return await self.call("agent.get", _params({"agentId": agent_id}))

    async def agent_kill(self, *, agent_id: str) -> Any:
        """End the agent's tmux session."""
        return await self.call("agent.kill", _params({"agentId": agent_id}))

    async def agent_list(self, *, sandbox_id: str | None = None, status: list | None = None) -> Any:
        """Agents, optionally of one sandbox and only in some statuses."""
        return await self.call("agent.list", _params({"sandboxId": sandbox_id, "status": status}))

    async def agent_read(self, *, agent_id: str, scrollback: int | None = None) -> Any:
        """The agent's screen as text, and scrollback lines when asked. Of an agent that is gone: the last screen cocoon kept (lastKnown, capturedAt), with at most 200 lines of scrollback."""
        return await self.call("agent.read", _params({"agentId": agent_id, "scrollback": scrollback}))

    async def agent_rename(self, *, agent_id: str, name: str) -> Any:
        """Give an agent another name; its id stays the same."""
        return await self.call("agent.rename", _params({"agentId": agent_id, "name": name}))

    async def agent_send_input(self, *, agent_id: str, text: str, enter: bool | None = None) -> Any:
        """Type text into the agent's terminal, followed by Enter unless enter is false."""
        return await self.call(
            "agent.send_input", _params({"agentId": agent_id, "text": text, "enter": enter})
        )

    async def agent_send_keys(self, *, agent_id: str, keys: list) -> Any:
        """Press named keys: Enter, Escape, Tab, Up, Down, C-c, y, n, ..."""
        return await self.call("agent.send_keys", _params({"agentId": agent_id, "keys": keys}))

    async def agent_spawn(
        self,
        *,
        sandbox_id: str,
        profile: str,
        name: str | None = None,
        prompt: str | None = None,
        env: dict | None = None,
        providers: list | None = None,
        model: str | None = None,
        cols: int | None = None,
        rows: int | None = None,
        budget: dict | None = None,
        steering: dict | None = None,
    ) -> Any:
        """Start an agent (profile: claude-code, codex, shell, ...) in a tmux session of a running sandbox, optionally with a first prompt, providers and a model. Secrets of the profile reach it through a private env file; behind the credential proxy, provider keys only as placeholders. steering: the agent gets its own token (COCOON_URL, COCOON_TOKEN) that creates and sees only its own sandboxes, within these ceilings and never beyond its parent's (no wider network than its sandbox's, only its providers, no more CPUs or memory than its sandbox), its budget carved out of the spawner's if the spawner's token has a budget ceiling; the token ends with the agent."""
        return await self.call(
            "agent.spawn",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "profile": profile,
                    "name": name,
                    "prompt": prompt,
                    "env": env,
                    "providers": providers,
                    "model": model,
                    "cols": cols,
                    "rows": rows,
                    "budget": budget,
                    "steering": steering,
                }
            ),
        )

    async def agent_wait(self, *, agent_id: str, until: list, timeout_s: float) -> Any:
        """Block (bounded by timeoutS) until the agent reaches one of the statuses."""
        return await self.call(
            "agent.wait", _params({"agentId": agent_id, "until": until, "timeoutS": timeout_s})
        )

    async def attention_ack(self, *, item_id: str) -> Any:
        """Acknowledge an item: no more notifications of it; it stays (acked) until its cause goes away."""
        return await self.call("attention.ack", _params({"itemId": item_id}))

    async def attention_get(self, *, item_id: str) -> Any:
        """One item, in any state."""
        return await self.call("attention.get", _params({"itemId": item_id}))

    async def attention_list(
        self, *, state: str | None = None, sandbox_id: str | None = None, limit: int | None = None
    ) -> Any:
        """What waits for a human, newest first: agents blocked (with their question), done or ended unexpectedly, tasks in review or failed, schedules that could not start a run, the setup checklist. state open (default; snoozed items once their time has come), acked, or all (closed too)."""
        return await self.call(
            "attention.list", _params({"state": state, "sandboxId": sandbox_id, "limit": limit})
        )

    async def attention_snooze(self, *, item_id: str, minutes: int) -> Any:
        """Hide an open item for some minutes; then it is open again and sent to the channels once more."""
        return await self.call("attention.snooze", _params({"itemId": item_id, "minutes": minutes}))

    async def egress_allow(self, *, host: str, sandbox_id: str | None = None) -> Any:
        """Allow a host (the one-click allow of a denied attempt): for every sandbox, or only for sandboxId. Takes effect at once, without restarting anything."""
        return await self.call("egress.allow", _params({"host": host, "sandboxId": sandbox_id}))

    async def egress_denied(self, *, sandbox_id: str | None = None, limit: int | None = None) -> Any:
        """Recent attempts the egress proxy refused (per sandbox, host, port and reason, counted)."""
        return await self.call("egress.denied", _params({"sandboxId": sandbox_id, "limit": limit}))

    async def egress_set_fence(self) -> Any:
        """Set the open sandboxes' fence (no host, no private networks) on every node that answers again. The setup checklist's fix for a fence not in force."""
        return await self.call("egress.set_fence", _params({}))

    async def egress_start_proxy(self) -> Any:
        """Build the egress proxy's image if needed and start (or replace) its container; answers egress.status. The setup checklist's fix for a proxy that is down."""
        return await self.call("egress.start_proxy", _params({}))

    async def egress_status(self) -> Any:
        """The egress proxy: whether it runs, its policy version and the version it has loaded, and whether this driver enforces egress at all; nodes: the same of each remote node's own proxy."""
        return await self.call("egress.status", _params({}))

    async def engine_adopt(self, *, sandbox_id: str, name: str | None = None) -> Any:
        """Make a sandbox another data directory left this one's, workspace and all: it is listed and works like any other from then on (its old agents are not adopted)."""
        return await self.call("engine.adopt", _params({"sandboxId": sandbox_id, "name": name}))

    async def engine_foreign(self) -> Any:
        """Sandboxes another data directory left on the engines under this instance's name."""
        return await self.call("engine.foreign", _params({}))

    async def engine_remove(self, *, sandbox_id: str) -> Any:
        """Remove what another data directory left of a sandbox: its container, workspace and network."""
        return await self.call("engine.remove", _params({"sandboxId": sandbox_id}))

    async def files_delete(self, *, sandbox_id: str, path: str, recursive: bool | None = None) -> Any:
        """Delete a file, a symlink (not its target) or a folder (recursive for a non-empty one)."""
        return await self.call(
            "files.delete", _params({"sandboxId": sandbox_id, "path": path, "recursive": recursive})
        )

    async def files_list(self, *, sandbox_id: str, path: str, recursive: bool | None = None) -> Any:
        """Entries of a folder in the sandbox (relative paths are taken from /workspace)."""
        return await self.call(
            "files.list", _params({"sandboxId": sandbox_id, "path": path, "recursive": recursive})
        )

    async def files_mkdir(self, *, sandbox_id: str, path: str) -> Any:
        """Create a folder (and its parents)."""
        return await self.call("files.mkdir", _params({"sandboxId": sandbox_id, "path": path}))

    async def files_read(self, *, sandbox_id: str, path: str, encoding: str | None = None) -> Any:
        """A file's content: UTF-8 text, or base64 for binary files (or when asked)."""
        return await self.call(
            "files.read", _params({"sandboxId": sandbox_id, "path": path, "encoding": encoding})
        )

    async def files_write(
        self, *, sandbox_id: str, path: str, content: str, encoding: str | None = None
    ) -> Any:
        """Create or replace a file (content as UTF-8 text or base64)."""
        return await self.call(
            "files.write",
            _params({"sandboxId": sandbox_id, "path": path, "content": content, "encoding": encoding}),
        )

    async def git_commit(
        self, *, sandbox_id: str, message: str, paths: list | None = None, author: str | None = None
    ) -> Any:
        """Commit all changes (or the given paths); author as "Name <email>"."""
        return await self.call(
            "git.commit",
            _params({"sandboxId": sandbox_id, "message": message, "paths": paths, "author": author}),
        )

    async def git_create_pr(
        self,
        *,
        sandbox_id: str,
        title: str,
        base: str,
        head: str,
        body: str | None = None,
        remote: str | None = None,
    ) -> Any:
        """Open a GitHub pull request for the workspace's origin repository."""
        return await self.call(
            "git.create_pr",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "title": title,
                    "body": body,
                    "base": base,
                    "head": head,
                    "remote": remote,
                }
            ),
        )

    async def git_push(self, *, sandbox_id: str, branch: str, remote: str | None = None) -> Any:
        """Push HEAD to a branch of a remote (default origin) on the configured GitHub host. The commits leave the sandbox as a bundle that cocoond verifies and pushes itself: GITHUB_TOKEN never enters the sandbox."""
        return await self.call(
            "git.push", _params({"sandboxId": sandbox_id, "branch": branch, "remote": remote})
        )

    async def git_set_remote(self, *, sandbox_id: str, url: str, remote: str | None = None) -> Any:
        """Point a remote of the workspace (default origin) at a repository on the configured GitHub host, adding it if the workspace has none: where git.push and git.create_pr go."""
        return await self.call(
            "git.set_remote", _params({"sandboxId": sandbox_id, "url": url, "remote": remote})
        )

    async def git_status(self, *, sandbox_id: str) -> Any:
        """Branch, ahead/behind and changed files of the workspace."""
        return await self.call("git.status", _params({"sandboxId": sandbox_id}))

    async def image_build(self, *, variant: str | None = None) -> Any:
        """Build a sandbox image variant in the background; progress arrives as image.build events. One build of a variant at a time: while one runs, the call queues nothing (queued false, running true)."""
        return await self.call("image.build", _params({"variant": variant}))

    async def image_status(self) -> Any:
        """The sandbox image variants and whether they are built."""
        return await self.call("image.status", _params({}))

    async def node_add(
        self,
        *,
        name: str,
        url: str,
        tls: dict | None = None,
        labels: dict | None = None,
        capacity: dict | None = None,
    ) -> Any:
        """Take in a Docker engine on another host: tcp://host:port with mutual TLS (tls: the CA its certificate comes from, pinned; cocoon's client certificate and key, which goes to the vault). The engine must answer (its version, runtimes and live-restore are read) and be no node yet; nothing is kept when it does not. New sandboxes may go there at once, in every network mode (the node gets an egress proxy of its own); the toolbox follows in the background."""
        return await self.call(
            "node.add",
            _params({"name": name, "url": url, "tls": tls, "labels": labels, "capacity": capacity}),
        )

    async def node_drain(self, *, node_id: str, stop: bool | None = None, undrain: bool | None = None) -> Any:
        """No new sandboxes on the node (undrain: ready again); with stop, its sandboxes are stopped too. Sandboxes there keep running otherwise."""
        return await self.call("node.drain", _params({"nodeId": node_id, "stop": stop, "undrain": undrain}))

    async def node_get(self, *, node_id: str) -> Any:
        """One node."""
        return await self.call("node.get", _params({"nodeId": node_id}))

    async def node_list(self) -> Any:
        """The nodes sandboxes run on, the local one first."""
        return await self.call("node.list", _params({}))

    async def node_remove(self, *, node_id: str) -> Any:
        """Forget a node that holds no sandboxes (drained first; its client key leaves the vault; every object of this instance on its engine, its egress proxy, networks, the toolbox volume and what is left of sandboxes, is removed if its last check answered). The local node stays."""
        return await self.call("node.remove", _params({"nodeId": node_id}))

    async def node_update(
        self, *, node_id: str, labels: dict | None = None, capacity: dict | None = None
    ) -> Any:
        """Change a node's labels or its capacity (what is given replaces what was read from the engine)."""
        return await self.call(
            "node.update", _params({"nodeId": node_id, "labels": labels, "capacity": capacity})
        )

    async def notifications_deliveries(
        self,
        *,
        item_id: str | None = None,
        channel: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> Any:
        """The delivery log: each item sent (or to be sent) to each channel, newest first, with its attempts and last error."""
        return await self.call(
            "notifications.deliveries",
            _params({"itemId": item_id, "channel": channel, "state": state, "limit": limit}),
        )

    async def notifications_test(self, *, channel: str) -> Any:
        """Send a test message to a channel of settings notifications.channels now."""
        return await self.call("notifications.test", _params({"channel": channel}))

    async def profile_create(
        self,
        *,
        name: str,
        command: list,
        prompt_mode: str | None = None,
        env: dict | None = None,
        secrets: list | None = None,
        hooks: bool | None = None,
        working_pattern: str | None = None,
        blocked_patterns: list | None = None,
        default_model: str | None = None,
        resume_command: list | None = None,
        resume_session_command: list | None = None,
        answers: list | None = None,
    ) -> Any:
        """Create a custom agent profile."""
        return await self.call(
            "profile.create",
            _params(
                {
                    "name": name,
                    "command": command,
                    "promptMode": prompt_mode,
                    "env": env,
                    "secrets": secrets,
                    "hooks": hooks,
                    "workingPattern": working_pattern,
                    "blockedPatterns": blocked_patterns,
                    "defaultModel": default_model,
                    "resumeCommand": resume_command,
                    "resumeSessionCommand": resume_session_command,
                    "answers": answers,
                }
            ),
        )

    async def profile_delete(self, *, name: str) -> Any:
        """Delete a custom agent profile no running agent uses."""
        return await self.call("profile.delete", _params({"name": name}))

    async def profile_get(self, *, name: str) -> Any:
        """One agent profile."""
        return await self.call("profile.get", _params({"name": name}))

    async def profile_list(self) -> Any:
        """Agent profiles: the built-ins (claude-code, codex, shell) and custom ones; providerMissing: its CLI needs an LLM provider and none has its key (a spawn's agent could not log in)."""
        return await self.call("profile.list", _params({}))

    async def profile_reset(self, *, name: str) -> Any:
        """Reset a built-in agent profile to its built-in definition."""
        return await self.call("profile.reset", _params({"name": name}))

    async def profile_update(
        self,
        *,
        name: str,
        command: list | None = None,
        prompt_mode: str | None = None,
        env: dict | None = None,
        secrets: list | None = None,
        hooks: bool | None = None,
        working_pattern: str | None = None,
        blocked_patterns: list | None = None,
        default_model: str | None = None,
        resume_command: list | None = None,
        resume_session_command: list | None = None,
        answers: list | None = None,
    ) -> Any:
        """Change fields of an agent profile (built-in or custom); returns the whole profile."""
        return await self.call(
            "profile.update",
            _params(
                {
                    "name": name,
                    "command": command,
                    "promptMode": prompt_mode,
                    "env": env,
                    "secrets": secrets,
                    "hooks": hooks,
                    "workingPattern": working_pattern,
                    "blockedPatterns": blocked_patterns,
                    "defaultModel": default_model,
                    "resumeCommand": resume_command,
                    "resumeSessionCommand": resume_session_command,
                    "answers": answers,
                }
            ),
        )

    async def projects_create(
        self, *, id: str, name: str, quotas: dict | None = None, server_secrets: bool | None = None
    ) -> Any:
        """Create a project: it owns the sandboxes (and their agents) made by its agent tokens."""
        return await self.call(
            "projects.create",
            _params({"id": id, "name": name, "quotas": quotas, "serverSecrets": server_secrets}),
        )

    async def projects_create_token(
        self,
        *,
        project: str,
        name: str,
        expires_in_days: int | None = None,
        sandboxes: str | None = None,
        ceilings: dict | None = None,
    ) -> Any:
        """Create an agent token of a project (for a CI job, a bot, a steering agent outside cocoon): it acts in that project alone, on all its sandboxes or only those it makes, within its ceilings. The plain token is in this answer only. For admins and the project's owners."""
        return await self.call(
            "projects.create_token",
            _params(
                {
                    "project": project,
                    "name": name,
                    "expiresInDays": expires_in_days,
                    "sandboxes": sandboxes,
                    "ceilings": ceilings,
                }
            ),
        )

    async def projects_delete_secret(self, *, project: str, name: str) -> Any:
        """Delete a project's own secret: its sandboxes get the server's of that name again where the project may use them, else none. For admins and the project's owners."""
        return await self.call("projects.delete_secret", _params({"project": project, "name": name}))

    async def projects_invite(self, *, project: str, role: str, expires_in_hours: int | None = None) -> Any:
        """A one-time link that makes whoever opens it (logging in, or signing up where password login is on) a member of the project in role; valid for expiresInHours (default 72). The link is in this answer only. For admins and the project's owners."""
        return await self.call(
            "projects.invite", _params({"project": project, "role": role, "expiresInHours": expires_in_hours})
        )

    async def projects_invites(self, *, project: str) -> Any:
        """A project's invitations not used yet and not expired (without their links)."""
        return await self.call("projects.invites", _params({"project": project}))

    async def projects_list(self) -> Any:
        """The projects the caller may see: all for an admin, else its own."""
        return await self.call("projects.list", _params({}))

    async def projects_members(self, *, project: str) -> Any:
        """The people of a project and their roles."""
        return await self.call("projects.members", _params({"project": project}))

    async def projects_remove_member(self, *, project: str, user: str) -> Any:
        """Take a person out of a project; their open sessions end at once. For admins and owners."""
        return await self.call("projects.remove_member", _params({"project": project, "user": user}))

    async def projects_revoke_invite(self, *, project: str, invite_id: str) -> Any:
        """Revoke an invitation not used yet: its link opens nothing any more."""
        return await self.call("projects.revoke_invite", _params({"project": project, "inviteId": invite_id}))

    async def projects_revoke_token(self, *, project: str, token_id: str) -> Any:
        """Revoke one of a project's own tokens (and the steering agents' tokens made below it); it stops working at once. For admins and the project's owners."""
        return await self.call("projects.revoke_token", _params({"project": project, "tokenId": token_id}))

    async def projects_secrets(self, *, project: str) -> Any:
        """The names of a project's own secrets (values are never returned). For its sandboxes they stand before the server's of the same name; the server's are used only where an admin lets the project (serverSecrets). For admins and the project's owners."""
        return await self.call("projects.secrets", _params({"project": project}))

    async def projects_set_member(
        self, *, project: str, user: str, role: str, quotas: dict | None = None
    ) -> Any:
        """Make a person (a Django user) a member of a project, or give them another role: owner, member, viewer, and their share of its quotas (quotas: what the sandboxes they make may take at once, and the agents in them; left out: as it was). Their open sessions end at once and open again with the new rights. For admins and the project's owners."""
        return await self.call(
            "projects.set_member", _params({"project": project, "user": user, "role": role, "quotas": quotas})
        )

    async def projects_set_secret(self, *, project: str, name: str, value: str) -> Any:
        """Create or replace a project's own secret (its ANTHROPIC_API_KEY, GITHUB_TOKEN, a provider's key): encrypted at rest, never returned, used for the project's sandboxes only. For admins and the project's owners."""
        return await self.call(
            "projects.set_secret", _params({"project": project, "name": name, "value": value})
        )

    async def projects_tokens(self, *, project: str) -> Any:
        """A project's own tokens (its agent tokens, steering agents' among them; a person's own are theirs), without their values. For admins and the project's owners."""
        return await self.call("projects.tokens", _params({"project": project}))

    async def projects_update(
        self,
        *,
        id: str,
        name: str | None = None,
        quotas: dict | None = None,
        server_secrets: bool | None = None,
    ) -> Any:
        """Rename a project or set its quotas (the whole set: a quota left out has no limit). Past a quota a create, start or spawn answers quota_exceeded; what runs already is left running."""
        return await self.call(
            "projects.update",
            _params({"id": id, "name": name, "quotas": quotas, "serverSecrets": server_secrets}),
        )

    async def providers_list(self) -> Any:
        """Model providers: the built-in anthropic and openai plus settings.providers, and whether each one's secret is set (never the value)."""
        return await self.call("providers.list", _params({}))

    async def providers_test(
        self, *, provider_id: str | None = None, provider: dict | None = None, key: str | None = None
    ) -> Any:
        """Check a provider from the server: reachability, auth and its model list. Give providerId for a saved one, or provider (and key) for input not saved yet."""
        return await self.call(
            "providers.test", _params({"providerId": provider_id, "provider": provider, "key": key})
        )

    async def sandbox_apply_patch(
        self, *, sandbox_id: str, patch: str, check: bool | None = None, three_way: bool | None = None
    ) -> Any:
        """Apply a git patch in the workspace (all or nothing unless threeWay); check only validates."""
        return await self.call(
            "sandbox.apply_patch",
            _params({"sandboxId": sandbox_id, "patch": patch, "check": check, "threeWay": three_way}),
        )

    async def sandbox_create(
        self,
        *,
        name: str | None = None,
        image: str | None = None,
        repo: str | None = None,
        branch: str | None = None,
        network: str | None = None,
        limits: dict | None = None,
        runtime: str | None = None,
        pool: bool | None = None,
        budget: dict | None = None,
        node: str | None = None,
        node_labels: dict | None = None,
        project: str | None = None,
    ) -> Any:
        """Create a hardened sandbox with a git workspace (empty or cloned from repo), tagged cocoon-baseline. Unset fields take the settings' sandbox defaults. Claims a started sandbox from the warm pool of these options when there is one (fromPool), unless pool is false."""
        return await self.call(
            "sandbox.create",
            _params(
                {
                    "name": name,
                    "image": image,
                    "repo": repo,
                    "branch": branch,
                    "network": network,
                    "limits": limits,
                    "runtime": runtime,
                    "pool": pool,
                    "budget": budget,
                    "node": node,
                    "nodeLabels": node_labels,
                    "project": project,
                }
            ),
        )

    async def sandbox_delete(self, *, sandbox_id: str) -> Any:
        """Delete a sandbox with its workspace."""
        return await self.call("sandbox.delete", _params({"sandboxId": sandbox_id}))

    async def sandbox_diff(self, *, sandbox_id: str, paths: list | None = None) -> Any:
        """The workspace as a git patch against cocoon-baseline (new, deleted, renamed, binary files and modes) with a per-file summary; it applies with `git apply` to the baseline."""
        return await self.call("sandbox.diff", _params({"sandboxId": sandbox_id, "paths": paths}))

    async def sandbox_exec(
        self,
        *,
        sandbox_id: str,
        command: list,
        cwd: str | None = None,
        env: dict | None = None,
        stdin: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Run a command (argv) in a running sandbox as its agent user; answers exit code and output."""
        return await self.call(
            "sandbox.exec",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "command": command,
                    "cwd": cwd,
                    "env": env,
                    "stdin": stdin,
                    "timeoutS": timeout_s,
                }
            ),
        )

    async def sandbox_get(self, *, sandbox_id: str) -> Any:
        """One sandbox."""
        return await self.call("sandbox.get", _params({"sandboxId": sandbox_id}))

    async def sandbox_list(self) -> Any:
        """The sandboxes the caller may see (its project's), newest first."""
        return await self.call("sandbox.list", _params({}))

    async def sandbox_rename(self, *, sandbox_id: str, name: str) -> Any:
        """Give a sandbox another name (unique); its id stays the same."""
        return await self.call("sandbox.rename", _params({"sandboxId": sandbox_id, "name": name}))

    async def sandbox_start(self, *, sandbox_id: str) -> Any:
        """Start a stopped sandbox."""
        return await self.call("sandbox.start", _params({"sandboxId": sandbox_id}))

    async def sandbox_stop(self, *, sandbox_id: str) -> Any:
        """Stop a sandbox; its files are kept."""
        return await self.call("sandbox.stop", _params({"sandboxId": sandbox_id}))

    async def schedule_create(
        self,
        *,
        name: str,
        cron: str,
        template: dict,
        timezone: str | None = None,
        overlap: str | None = None,
        keep_runs: int | None = None,
        enabled: bool | None = None,
    ) -> Any:
        """Create a schedule: a cron expression (5 fields or @daily, ...) in a timezone (default UTC) that creates and starts a task from template when due. overlap: skip (default: nothing starts while a run is queued or running), queue or parallel. keepRuns finished runs are kept (default 10); older ones are deleted with their sandboxes."""
        return await self.call(
            "schedule.create",
            _params(
                {
                    "name": name,
                    "cron": cron,
                    "timezone": timezone,
                    "template": template,
                    "overlap": overlap,
                    "keepRuns": keep_runs,
                    "enabled": enabled,
                }
            ),
        )

    async def schedule_delete(self, *, schedule_id: str) -> Any:
        """Delete a schedule; its runs stay as tasks."""
        return await self.call("schedule.delete", _params({"scheduleId": schedule_id}))

    async def schedule_get(self, *, schedule_id: str) -> Any:
        """One schedule."""
        return await self.call("schedule.get", _params({"scheduleId": schedule_id}))

    async def schedule_list(self) -> Any:
        """All schedules, by name."""
        return await self.call("schedule.list", _params({}))

    async def schedule_preview(
        self,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        schedule_id: str | None = None,
        count: int | None = None,
        after: str | None = None,
    ) -> Any:
        """The next times of a cron expression in a timezone, for unsaved input (cron, timezone) or a saved schedule (scheduleId); after defaults to now."""
        return await self.call(
            "schedule.preview",
            _params(
                {
                    "cron": cron,
                    "timezone": timezone,
                    "scheduleId": schedule_id,
                    "count": count,
                    "after": after,
                }
            ),
        )

    async def schedule_run(self, *, schedule_id: str) -> Any:
        """Run a schedule now, outside its cron times (conflict for overlap: skip with a run open)."""
        return await self.call("schedule.run", _params({"scheduleId": schedule_id}))

    async def schedule_update(
        self,
        *,
        schedule_id: str,
        name: str | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        template: dict | None = None,
        overlap: str | None = None,
        keep_runs: int | None = None,
        enabled: bool | None = None,
    ) -> Any:
        """Change fields of a schedule; a new cron, timezone or enabled recomputes nextRunAt."""
        return await self.call(
            "schedule.update",
            _params(
                {
                    "scheduleId": schedule_id,
                    "name": name,
                    "cron": cron,
                    "timezone": timezone,
                    "template": template,
                    "overlap": overlap,
                    "keepRuns": keep_runs,
                    "enabled": enabled,
                }
            ),
        )

    async def secrets_delete(self, *, name: str) -> Any:
        """Delete a secret."""
        return await self.call("secrets.delete", _params({"name": name}))

    async def secrets_list(self) -> Any:
        """Names and timestamps of all secrets; values are never returned."""
        return await self.call("secrets.list", _params({}))

    async def secrets_set(self, *, name: str, value: str) -> Any:
        """Create or replace a secret. The value is encrypted at rest and never returned."""
        return await self.call("secrets.set", _params({"name": name, "value": value}))

    async def settings_get(self) -> Any:
        """The whole settings document."""
        return await self.call("settings.get", _params({}))

    async def settings_reset(self, *, keys: list | None = None) -> Any:
        """Reset the given dotted setting paths (or everything) to their defaults."""
        return await self.call("settings.reset", _params({"keys": keys}))

    async def settings_update(
        self,
        *,
        general: dict | None = None,
        sandbox: dict | None = None,
        egress: dict | None = None,
        providers: dict | None = None,
        secrets: dict | None = None,
        security: dict | None = None,
        agents: dict | None = None,
        tasks: dict | None = None,
        git: dict | None = None,
        toolbox: dict | None = None,
        usage: dict | None = None,
        notifications: dict | None = None,
    ) -> Any:
        """Deep-merge a partial settings document; returns the whole validated document."""
        return await self.call(
            "settings.update",
            _params(
                {
                    "general": general,
                    "sandbox": sandbox,
                    "egress": egress,
                    "providers": providers,
                    "secrets": secrets,
                    "security": security,
                    "agents": agents,
                    "tasks": tasks,
                    "git": git,
                    "toolbox": toolbox,
                    "usage": usage,
                    "notifications": notifications,
                }
            ),
        )

    async def system_info(self) -> Any:
        """Server version, sandbox driver kind, its capabilities and runtimes, and the warm pools' members (ready, starting)."""
        return await self.call("system.info", _params({}))

    async def system_methods(self) -> Any:
        """The method catalogue with JSON Schemas, limited to what the calling token may call."""
        return await self.call("system.methods", _params({}))

    async def system_setup_status(self) -> Any:
        """The first-run checklist (admin token, network, proxy, image, toolbox), translated."""
        return await self.call("system.setup_status", _params({}))

    async def task_approve(
        self, *, task_id: str, push: dict | None = None, pull_request: dict | None = None
    ) -> Any:
        """Accept a task in review: done, its own sandbox removed (the diff stays with the task). With push, the changes are committed and pushed to a branch (default cocoon/<taskId>) first; with pullRequest, a GitHub pull request is opened from that branch too."""
        return await self.call(
            "task.approve", _params({"taskId": task_id, "push": push, "pullRequest": pull_request})
        )

    async def task_cancel(self, *, task_id: str) -> Any:
        """Cancel a queued or running task (its running agent is stopped; its own sandbox stays for settings.tasks.keepFailedSandboxHours)."""
        return await self.call("task.cancel", _params({"taskId": task_id}))

    async def task_create(
        self,
        *,
        prompt: str,
        title: str | None = None,
        sandbox_id: str | None = None,
        sandbox: dict | None = None,
        workflow: list | None = None,
        budget: dict | None = None,
    ) -> Any:
        """Create a task and start it at once. A task: prompt, a new sandbox (sandbox: sandbox.create fields) or an existing one (sandboxId), and a workflow of steps run one after another, each an agent (profile) with a prompt template ({{prompt}}, {{taskId}}, {{reportFile}}, {{workdir}}, {{step}}, {{reportInstructions}}) and a timeout (default: one claude-code step). The last agent writes a JSON report {ok, summary, autoClose, details?} to $COCOON_REPORT_FILE (<workdir>/.cocoon/report/<taskId>.json): ok + autoClose -> done and the task's own sandbox removed (its diff kept); otherwise review."""
        return await self.call(
            "task.create",
            _params(
                {
                    "prompt": prompt,
                    "title": title,
                    "sandboxId": sandbox_id,
                    "sandbox": sandbox,
                    "workflow": workflow,
                    "budget": budget,
                }
            ),
        )

    async def task_get(self, *, task_id: str) -> Any:
        """One task with its steps, report and diff."""
        return await self.call("task.get", _params({"taskId": task_id}))

    async def task_list(
        self, *, status: list | None = None, schedule_id: str | None = None, limit: int | None = None
    ) -> Any:
        """Tasks, newest first (without patches: task.get has them)."""
        return await self.call(
            "task.list", _params({"status": status, "scheduleId": schedule_id, "limit": limit})
        )

    async def task_reject(self, *, task_id: str) -> Any:
        """Close a task in review without its changes (cancelled; its sandbox stays for a look)."""
        return await self.call("task.reject", _params({"taskId": task_id}))

    async def task_retry(self, *, task_id: str) -> Any:
        """Queue a failed task again from its failed step (that step's agent is started anew; the steps before stay done). When its own sandbox was removed meanwhile (settings.tasks.keepFailedSandboxHours), it starts over from the first step in a new one."""
        return await self.call("task.retry", _params({"taskId": task_id}))

    async def tokens_create(
        self,
        *,
        name: str,
        scope: str,
        project: str | None = None,
        expires_in_days: int | None = None,
        sandboxes: str | None = None,
        ceilings: dict | None = None,
    ) -> Any:
        """Create a token. The plain token is in this answer only; it is never shown again. An agent token may carry ceilings: network modes, providers, a sandbox's CPUs and memory, and a budget that each sandbox, task or steering agent it makes gets its own out of (ceiling_exceeded past them)."""
        return await self.call(
            "tokens.create",
            _params(
                {
                    "scope": scope,
                    "project": project,
                    "name": name,
                    "expiresInDays": expires_in_days,
                    "sandboxes": sandboxes,
                    "ceilings": ceilings,
                }
            ),
        )

    async def tokens_create_own(self, *, name: str, expires_in_days: int | None = None) -> Any:
        """Create a token of the calling person's own, for their scripts: it acts as they do at each call (their role, in the project their session works in), and stops once they are deactivated. The plain token is in this answer only."""
        return await self.call("tokens.create_own", _params({"name": name, "expiresInDays": expires_in_days}))

    async def tokens_list(self) -> Any:
        """All API tokens (without their values)."""
        return await self.call("tokens.list", _params({}))

    async def tokens_mine(self) -> Any:
        """The calling person's own tokens (user scope), without their values."""
        return await self.call("tokens.mine", _params({}))

    async def tokens_revoke(self, *, token_id: str) -> Any:
        """Revoke a token; it stops working at once."""
        return await self.call("tokens.revoke", _params({"tokenId": token_id}))

    async def tokens_revoke_own(self, *, token_id: str) -> Any:
        """Revoke one of the calling person's own tokens; it stops working at once."""
        return await self.call("tokens.revoke_own", _params({"tokenId": token_id}))

    async def toolbox_install(self) -> Any:
        """Install or update the agent toolbox in the background (no image rebuild); progress arrives as toolbox.install events. One at a time: while one runs, the call queues nothing (queued false, running true) and that install's events tell."""
        return await self.call("toolbox.install", _params({}))

    async def toolbox_status(self) -> Any:
        """Whether the agent toolbox (/opt/agents) is installed, and its package versions."""
        return await self.call("toolbox.status", _params({}))

    async def usage_budgets(self, *, state: str | None = None) -> Any:
        """Every budget as last judged after an ingest: its scope (agent, task, sandbox, day), what it allows, what was spent, and its state (ok; warned: settings usage.notifyAt of it spent; exceeded: requests refused)."""
        return await self.call("usage.budgets", _params({"state": state}))

    async def usage_records(
        self,
        *,
        sandbox_id: str | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        schedule_id: str | None = None,
        from_: str | None = None,
        to: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Any:
        """LLM requests of agents as the credential proxy metered them (model, tokens read from the provider's answer, cost by settings usage.prices), newest first; filters sandboxId, agentId, taskId, scheduleId, from, to; pass next as cursor for the page after."""
        return await self.call(
            "usage.records",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "agentId": agent_id,
                    "taskId": task_id,
                    "scheduleId": schedule_id,
                    "from": from_,
                    "to": to,
                    "limit": limit,
                    "cursor": cursor,
                }
            ),
        )

    async def usage_set_budget(
        self,
        *,
        budget: Any,
        agent_id: str | None = None,
        task_id: str | None = None,
        sandbox_id: str | None = None,
    ) -> Any:
        """Set an agent's, a task's or a sandbox's budget ({cost?, tokens?, onSpent?}; null removes it) and judge it at once: raised past what was spent, its requests pass the credential proxy again as soon as it has loaded the new policy (this call waits for that)."""
        return await self.call(
            "usage.set_budget",
            _params({"agentId": agent_id, "taskId": task_id, "sandboxId": sandbox_id, "budget": budget}),
        )

    async def usage_summary(
        self,
        *,
        group_by: str,
        sandbox_id: str | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        schedule_id: str | None = None,
        from_: str | None = None,
        to: str | None = None,
    ) -> Any:
        """Requests, tokens and cost summed per agent, sandbox, task, schedule, model, provider or day (most cost first; days in order), and over all; the same filters as usage.records."""
        return await self.call(
            "usage.summary",
            _params(
                {
                    "sandboxId": sandbox_id,
                    "agentId": agent_id,
                    "taskId": task_id,
                    "scheduleId": schedule_id,
                    "from": from_,
                    "to": to,
                    "groupBy": group_by,
                }
            ),
        )
