"""Agents in tmux inside real sandboxes: the shell profile end to end (SPEC §4). The Claude Code and
Codex end-to-end runs against stand-in LLM endpoints are not written yet (see the agents issue)."""

import hashlib
import json
import subprocess
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


@pytest.fixture
def sandbox(cocoond, sandbox_image):
    # This checkout's image by its content tag: another checkout on the engine may re-tag :latest.
    created = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    yield created
    cocoond.post("sandbox.delete", {"sandboxId": created["id"]})


def call(cocoond, method, **params):
    return cocoond.call(method, params)


def wait(cocoond, agent, *until, timeout=30):
    return call(cocoond, "agent.wait", agentId=agent["id"], until=list(until), timeoutS=timeout)


def test_one_tokens_waits_hold_up_no_other_tokens_calls(cocoond, sandbox):
    # A wait holds a thread while it waits. WebSocket calls ran in the event loop's default executor
    # (min(32, CPUs + 4) threads), so a few waits held up everybody's calls; now one token has at most
    # calls.PER_CALLER of the pool's calls.THREADS threads.
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    other = call(cocoond, "tokens.create", name="other", scope="agent")["token"]
    waits = 140  # more than the pool has threads
    with cocoond.ws() as ws, cocoond.ws(token=other) as other_ws:
        for number in range(waits):
            params = {"agentId": agent["id"], "until": ["blocked"], "timeoutS": 60}
            ws.send({"id": f"wait-{number}", "method": "agent.wait", "params": params})
        # Answered in the event loop once the calls before it were let in (their token checked).
        ws.call("events.subscribe", {"types": ["settings.updated"]})
        assert other_ws.call("agent.get", {"agentId": agent["id"]})["status"] != "blocked"
        assert cocoond.call("system.info", token=other)["version"]
        # The token's own waits take turns; ended by the agent's exit, every one answers.
        call(cocoond, "agent.kill", agentId=agent["id"])
        answers = [ws.receive(timeout=30) for _ in range(waits)]
    assert sorted(answer["id"] for answer in answers) == sorted(f"wait-{number}" for number in range(waits))
    assert {answer["error"]["code"] for answer in answers} == {"timeout"}


def test_a_shell_agent_works_goes_idle_and_exits_with_its_code(cocoond, sandbox):
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    assert agent["id"].startswith("ag_")
    assert wait(cocoond, agent, "idle")["statusSource"] == "heuristic"
    call(cocoond, "agent.send_input", agentId=agent["id"], text="sleep 4")
    assert wait(cocoond, agent, "working")["status"] == "working"
    assert wait(cocoond, agent, "idle")["status"] == "idle"
    call(cocoond, "agent.send_input", agentId=agent["id"], text="echo marker-$((6*7))")
    screen = call(cocoond, "agent.read", agentId=agent["id"])["screen"]
    assert "marker-42" in screen or "marker-42" in call(cocoond, "agent.read", agentId=agent["id"])["screen"]
    call(cocoond, "agent.send_input", agentId=agent["id"], text="exit 3")
    exited = wait(cocoond, agent, "exited")
    assert (exited["status"], exited["exitCode"]) == ("exited", 3)
    response = cocoond.post("agent.send_input", {"agentId": agent["id"], "text": "echo too late"})
    assert response.json()["error"]["code"] == "conflict"


def test_wait_is_woken_by_events_and_never_polls_the_sandbox(cocoond, sandbox, docker_client):
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    wait(cocoond, agent, "idle")
    started = time.monotonic()
    assert wait(cocoond, agent, "idle", timeout=600)["status"] == "idle"  # already there: at once
    assert time.monotonic() - started < 1

    # Five waits for a status that never comes are bounded and cost the sandbox no exec of their own:
    # the only execs in the meantime are the poller's (none while its watcher stream is up, else one
    # per 2 s tick).
    container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")
    since = time.time()
    with ThreadPoolExecutor(5) as pool:
        waits = [
            pool.submit(
                cocoond.post, "agent.wait", {"agentId": agent["id"], "until": ["blocked"], "timeoutS": 4}
            )
            for _ in range(5)
        ]
        answers = [future.result().json() for future in waits]
    ended = time.time()
    assert [answer["error"]["code"] for answer in answers] == ["timeout"] * 5
    assert ended - since < 8
    execs = docker_client.events(
        since=since, until=ended, filters={"container": container.id, "event": "exec_create"}, decode=True
    )
    assert len(list(execs)) <= 4
    call(cocoond, "agent.read", agentId=agent["id"])  # one exec: the count above would have seen it
    read = docker_client.events(
        since=ended, until=time.time() + 1, filters={"container": container.id, "event": "exec_create"}
    )
    assert len(list(read)) >= 1

    # A change made elsewhere wakes a waiting call at once.
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(wait, cocoond, agent, "exited")
        time.sleep(0.5)
        assert not waiting.done()
        call(cocoond, "agent.kill", agentId=agent["id"])
        killed = time.monotonic()
        assert waiting.result()["status"] == "exited"
        assert time.monotonic() - killed < 1


def test_keys_and_kill(cocoond, sandbox):
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell", prompt="sleep 300")
    assert wait(cocoond, agent, "working")["status"] == "working"
    call(cocoond, "agent.send_keys", agentId=agent["id"], keys=["C-c"])
    assert wait(cocoond, agent, "idle")["status"] == "idle"
    bad = cocoond.post("agent.send_keys", {"agentId": agent["id"], "keys": ["rm -rf /"]})
    assert bad.json()["error"]["code"] == "invalid_params"
    assert call(cocoond, "agent.kill", agentId=agent["id"])["status"] == "exited"
    assert [a["id"] for a in call(cocoond, "agent.list", sandboxId=sandbox["id"])] == [agent["id"]]


def test_an_agent_is_named_by_its_prompt_or_as_given_and_renamed_with_its_id_kept(cocoond, sandbox):
    """Issue #37: names people use; the id stays what the API knows it by."""
    prompted = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell", prompt="echo hi\tthere")
    assert prompted["name"] == "echo hi there"  # the prompt's first words, a control character a space
    given = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell", name="reviewer")
    plain = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    assert (given["name"], plain["name"]) == ("reviewer", "shell")
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["agent.updated"]})
        renamed = call(cocoond, "agent.rename", agentId=plain["id"], name="Ops · täglich")
        assert (renamed["id"], renamed["name"]) == (plain["id"], "Ops · täglich")
        # The rename's event (others may come first: the three agents' status as the poller sees it).
        names = (ws.receive(timeout=10)["event"] for _ in range(20))
        assert any(e["agentId"] == plain["id"] and e["data"]["name"] == "Ops · täglich" for e in names)
    assert call(cocoond, "agent.get", agentId=plain["id"])["name"] == "Ops · täglich"
    for bad in ["", " padded", "line\nbreak", "x" * 81]:
        refused = cocoond.post("agent.rename", {"agentId": plain["id"], "name": bad})
        assert refused.json()["error"]["code"] == "invalid_params", bad
        refused = cocoond.post("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell", "name": bad})
        assert refused.json()["error"]["code"] == "invalid_params", bad
    assert len(call(cocoond, "agent.list", sandboxId=sandbox["id"])) == 3  # a refused spawn made none
    assert call(cocoond, "agent.get", agentId=plain["id"])["name"] == "Ops · täglich"


def test_secrets_reach_the_agent_only_through_its_env_file(cocoond, sandbox, docker_client):
    # The one kind of secret that goes in as itself: marked raw by an admin (provider keys go in as
    # placeholders only, and not at all without network).
    value = "sk-agent-secret-0123456789"
    cocoond.call("secrets.set", {"name": "RAW_AGENT_SECRET", "value": value})
    cocoond.call("settings.update", {"secrets": {"RAW_AGENT_SECRET": {"raw": True}}})
    cocoond.call(
        "profile.create", {"name": "raw-reader", "command": ["claude"], "secrets": ["RAW_AGENT_SECRET"]}
    )
    try:
        # With no toolbox in this sandbox its command is not found, so the agent starts (reading and
        # deleting its env file) and exits with 127.
        agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="raw-reader")
        exited = wait(cocoond, agent, "exited")
        assert exited["exitCode"] == 127
        container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")
        assert value not in json.dumps(container.attrs)
        # The value comes through stdin, so the search itself does not put it into an argv.
        script = (
            "grep -rslF -f /dev/stdin /proc/*/cmdline /proc/*/environ $HOME /tmp /workspace; "
            "ls -A $HOME/.cocoon/env"
        )
        leaks = cocoond.call(
            "sandbox.exec",
            {"sandboxId": sandbox["id"], "command": ["sh", "-c", script], "stdin": value + "\n"},
        )
        assert leaks["stdout"].strip() == ""  # no copy anywhere, and the env file is gone
    finally:
        cocoond.call("profile.delete", {"name": "raw-reader"})
        cocoond.call("secrets.delete", {"name": "RAW_AGENT_SECRET"})
        cocoond.call("settings.reset", {"keys": ["secrets"]})


def test_bad_input_is_refused(cocoond, sandbox):
    unknown = cocoond.post("agent.spawn", {"sandboxId": sandbox["id"], "profile": "nope"})
    assert unknown.json()["error"]["code"] == "not_found"
    bad_status = cocoond.post("agent.wait", {"agentId": "ag_x", "until": ["sleeping"], "timeoutS": 1})
    assert bad_status.json()["error"]["code"] == "invalid_params"
    cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})
    stopped = cocoond.post("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    assert stopped.json()["error"]["code"] == "conflict"


def test_an_agent_survives_a_cocoond_restart(start_cocoond, sandbox_image):
    instance = start_cocoond()
    created = instance.call("sandbox.create", {"network": "none"})
    agent = instance.call(
        "agent.spawn", {"sandboxId": created["id"], "profile": "shell", "prompt": "export KEPT=yes"}
    )
    instance.proc.kill()  # SIGKILL: no clean shutdown
    instance.proc.wait()
    instance.start()
    instance.call("agent.send_input", {"agentId": agent["id"], "text": "echo kept=$KEPT"})
    screen = ""
    for _ in range(20):
        screen = instance.call("agent.read", {"agentId": agent["id"]})["screen"]
        if "kept=yes" in screen:
            break
        subprocess.run(["sleep", "0.2"])
    assert "kept=yes" in screen


def attach(cocoond, agent, **query):
    params = "&".join(f"{key}={value}" for key, value in {"token": cocoond.token, **query}.items())
    return connect(f"ws://127.0.0.1:{cocoond.port}/v1/agents/{agent['id']}/attach?{params}", open_timeout=10)


def read_until(ws, needle, timeout=10):
    seen, deadline = b"", time.monotonic() + timeout
    while needle not in seen:
        seen += ws.recv(timeout=max(0.1, deadline - time.monotonic()))
    return seen


def test_attach_types_reads_back_and_resizes(cocoond, sandbox):
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    wait(cocoond, agent, "idle")
    with attach(cocoond, agent, cols=100, rows=30) as ws, attach(cocoond, agent, mode="ro") as watcher:
        ws.send(b"echo hi-$((40+2))\r")
        assert b"hi-42" in read_until(ws, b"hi-42")
        assert b"hi-42" in read_until(watcher, b"hi-42")  # a second viewer sees it too
        watcher.send(b"echo from-the-watcher\r")  # read-only: dropped
        ws.send(json.dumps({"type": "resize", "cols": 77, "rows": 20}))
        ws.send(b"tput cols\r")
        assert b"77" in read_until(ws, b"77")
    # Viewers leaving never end the agent.
    assert call(cocoond, "agent.get", agentId=agent["id"])["status"] != "exited"
    screen = call(cocoond, "agent.read", agentId=agent["id"], scrollback=200)
    assert "from-the-watcher" not in screen["screen"] + screen.get("scrollback", "")


def test_attach_delivers_a_large_paste_whole_while_cocoond_keeps_answering(cocoond, sandbox):
    # The terminal's descriptor is non-blocking and written on cocoond's event loop: what it cannot take
    # at once must follow when it has room, byte for byte, and the loop must serve other calls meanwhile.
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    wait(cocoond, agent, "idle")
    paste = bytes(b"abcdefghijklmnopqrstuvwxyz0123456789"[i % 36] for i in range(2_000_000))
    receive = b"head -c 2000000 >/tmp/paste"  # raw: no line limit, nothing translated or echoed
    with attach(cocoond, agent) as ws:
        ws.send(b"stty raw -echo; echo ready-$((2+3)); " + receive + b"; stty sane; echo got-$((1+2))\r")
        read_until(ws, b"ready-5")
        with ThreadPoolExecutor(1) as pool:
            answers = pool.submit(lambda: [call(cocoond, "system.info") for _ in range(5)])
            for start in range(0, len(paste), 65536):
                ws.send(paste[start : start + 65536])
            assert len(answers.result(timeout=30)) == 5
        read_until(ws, b"got-3", timeout=60)
    result = call(cocoond, "sandbox.exec", sandboxId=sandbox["id"], command=["md5sum", "/tmp/paste"])
    assert result["stdout"].split()[0] == hashlib.md5(paste).hexdigest()


def test_attach_closes_when_the_agent_ends(cocoond, sandbox):
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="shell")
    wait(cocoond, agent, "idle")
    with attach(cocoond, agent) as ws:
        ws.send(b"echo up-$((3*3))\r")
        read_until(ws, b"up-9")
        call(cocoond, "agent.kill", agentId=agent["id"])
        with pytest.raises(ConnectionClosed):
            read_until(ws, b"never printed", timeout=15)


def test_attach_needs_a_token_and_a_live_agent(cocoond, sandbox):
    with connect(f"ws://127.0.0.1:{cocoond.port}/v1/agents/ag_nothere/attach?token={cocoond.token}") as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.rcvd.code == 4404
    with connect(f"ws://127.0.0.1:{cocoond.port}/v1/agents/ag_nothere/attach") as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.rcvd.code == 4401


def test_hooks_are_installed_and_hook_reports_win(cocoond, sandbox):
    # A stand-in `claude` (the toolbox is not in this sandbox) that just stays in the foreground.
    cocoond.call(
        "sandbox.exec",
        {
            "sandboxId": sandbox["id"],
            "command": [
                "sh",
                "-c",
                "mkdir -p ~/bin && printf '#!/bin/sh\\nexec sleep 300\\n' > ~/bin/claude && "
                "chmod +x ~/bin/claude",
            ],
        },
    )
    # The key comes with the call: a sandbox without network gets no provider credentials.
    agent = call(
        cocoond,
        "agent.spawn",
        sandboxId=sandbox["id"],
        profile="claude-code",
        env={
            "PATH": "/home/agent/bin:/opt/cocoon/bin:/usr/bin:/bin",
            "ANTHROPIC_API_KEY": "sk-ant-0123456789-abcdefghijklmnopqrst",
        },
    )

    def read(path):
        return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["cat", path]})["stdout"]

    settings = json.loads(read("/home/agent/.claude/settings.json"))
    assert settings["hooks"]["Stop"][0]["hooks"][0]["command"] == "/opt/cocoon/bin/cocoon-status done"
    # Asking before tools run whatever the CLI version's default (newer ones start in `auto`).
    assert settings["permissions"]["defaultMode"] == "default"
    state = json.loads(read("/home/agent/.claude.json"))
    assert state["hasCompletedOnboarding"] is True
    assert state["customApiKeyResponses"]["approved"] == ["abcdefghijklmnopqrst"]

    def hook(status, event='{"json": 1}', argument=""):
        """cocoon-status as a hook calls it: Claude Code's event on stdin, Codex's notify JSON as $2."""
        command = ["sh", "-c", 'COCOON_AGENT_ID=$1 cocoon-status "$2" "$3"', "hook", agent["id"], status]
        run = {"sandboxId": sandbox["id"], "command": [*command, argument], "stdin": event}
        result = cocoond.call("sandbox.exec", run)
        assert (result["exitCode"], result["stdout"], result["stderr"]) == (0, "", "")  # silent for the CLI

    claude_session = "0b0e4e6c-1c4f-4b4e-9a0e-3f0f1d2c3b4a"
    # A prompt that quotes a session id is JSON-escaped in the event: never taken for the session.
    hook("working", json.dumps({"session_id": claude_session, "prompt": '"session_id":"ffff"'}))
    assert wait(cocoond, agent, "working")["cliSessionId"] == claude_session
    # Hostile session ids never replace it: too long, shell syntax, not hex, a leading dash.
    for hostile in ("a" * 65, "$(touch /tmp/pwned)", "0b0e;rm -rf /", "ZZZZ", "-rf"):
        hook("working", json.dumps({"session_id": hostile}))
    # Codex's hooks name its session as Claude Code's do.
    codex_thread = "01a23d6c-0bd4-78a1-8eea-7239afb26645"
    hook("blocked", json.dumps({"session_id": codex_thread, "hook_event_name": "PermissionRequest"}))
    blocked = wait(cocoond, agent, "blocked")
    assert (blocked["statusSource"], blocked["cliSessionId"]) == ("hook", codex_thread)
    # Codex's TUI notifies also for its side thread that titles the task, which may end while the turn
    # waits for the approval: not the agent's turn, so not reported.
    side_thread = "019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b"
    hook("done", event="", argument=json.dumps({"type": "agent-turn-complete", "thread-id": side_thread}))
    assert read(f"/opt/cocoon/status/{agent['id']}").startswith("blocked ")
    explained = call(cocoond, "agent.explain", agentId=agent["id"])
    assert (explained["rule"], explained["hook"]["status"], explained["hook"]["counts"]) == (
        "hook",
        "blocked",
        True,
    )
    assert 0 <= explained["hook"]["ageS"] < 10
    german = cocoond.post("agent.explain", {"agentId": agent["id"]}, headers={"x-cocoon-lang": "de"}).json()
    assert german["result"]["summary"].startswith("Sein eigener Hook hat diesen Status vor")
    # The notify of the session's own thread reports its turn done.
    hook("done", event="", argument=json.dumps({"type": "agent-turn-complete", "thread-id": codex_thread}))
    done = wait(cocoond, agent, "done")
    assert (done["statusSource"], done["cliSessionId"]) == ("hook", codex_thread)
    call(cocoond, "agent.kill", agentId=agent["id"])


def test_a_known_question_on_screen_is_blocked_without_hooks(cocoond, sandbox):
    # A stand-in `claude` whose hooks never fire: only the screen can tell that it waits for an answer.
    script = (
        "mkdir -p ~/bin && cat > ~/bin/claude <<'EOF'\n"
        "#!/bin/sh\n"
        "echo 'Do you want to proceed?'\n"
        "read answer\n"
        "clear\n"  # like a TUI, the question goes away once it is answered
        'echo "proceeding with $answer"\n'
        "exec sleep 300\n"
        "EOF\n"
        "chmod +x ~/bin/claude"
    )
    cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["sh", "-c", script]})
    agent = call(
        cocoond,
        "agent.spawn",
        sandboxId=sandbox["id"],
        profile="claude-code",
        env={"PATH": "/home/agent/bin:/usr/bin:/bin"},
    )
    blocked = wait(cocoond, agent, "blocked")
    assert blocked["statusSource"] == "heuristic"
    call(cocoond, "agent.send_keys", agentId=agent["id"], keys=["y", "Enter"])
    assert wait(cocoond, agent, "working", "done")["status"] in {"working", "done"}
    done = wait(cocoond, agent, "done")  # quiet after the answer: its task is done
    assert done["statusSource"] == "heuristic"
    explained = call(cocoond, "agent.explain", agentId=agent["id"])
    assert (explained["rule"], explained["question"]) == ("quiet_after_task", "")
    assert "proceeding with y" in call(cocoond, "agent.read", agentId=agent["id"])["screen"]
    call(cocoond, "agent.kill", agentId=agent["id"])


def test_hook_files_merge_into_the_users_own_and_a_respawn_changes_nothing(cocoond, sandbox):
    def write(path, content):
        command = ["sh", "-c", 'mkdir -p "$(dirname "$HOME/$1")" && cat > "$HOME/$1"', "write", path]
        cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": command, "stdin": content})

    def read(path):
        command = ["cat", f"/home/agent/{path}"]
        return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": command})["stdout"]

    user_stop = {"hooks": [{"type": "command", "command": "notify-send done"}]}
    write(
        ".claude/settings.json",
        json.dumps(
            {
                "model": "opus",
                "hooks": {"Stop": [user_stop], "PreCompact": [user_stop]},
                "permissions": {"defaultMode": "acceptEdits", "allow": ["Bash(ls)"]},
            }
        ),
    )
    write(".claude.json", json.dumps({"numStartups": 7, "theme": "light", "projects": {"/src": {"x": 1}}}))
    write(
        ".codex/config.toml",
        '# my favourite\nmodel = "o3"\napproval_policy = "never"\nnotify = ["mine"]\n\n'
        '[profiles.fast]\nmodel = "o4"\n',
    )
    snapshots = []
    for _ in range(2):  # the second spawn must find everything as the first left it
        for profile in ("claude-code", "codex"):
            # No toolbox in this sandbox: the CLIs are not found and exit, after their files are written.
            agent = call(
                cocoond,
                "agent.spawn",
                sandboxId=sandbox["id"],
                profile=profile,
                env={"OPENAI_BASE_URL": "http://x/v1"},
            )
            wait(cocoond, agent, "exited")
        snapshots.append(
            [read(path) for path in (".claude/settings.json", ".claude.json", ".codex/config.toml")]
        )
    assert snapshots[0] == snapshots[1]

    settings = json.loads(snapshots[1][0])
    assert settings["model"] == "opus"
    assert settings["hooks"]["PreCompact"] == [user_stop]
    assert settings["permissions"] == {"defaultMode": "acceptEdits", "allow": ["Bash(ls)"]}  # the user's
    stop_commands = [entry["command"] for group in settings["hooks"]["Stop"] for entry in group["hooks"]]
    assert stop_commands == ["notify-send done", "/opt/cocoon/bin/cocoon-status done"]
    state = json.loads(snapshots[1][1])
    assert (state["numStartups"], state["theme"], state["projects"]["/src"]) == (7, "light", {"x": 1})
    assert state["hasCompletedOnboarding"] is True
    assert state["projects"]["/workspace"]["hasTrustDialogAccepted"] is True
    codex = tomllib.loads(snapshots[1][2])
    assert (codex["model"], codex["approval_policy"], codex["profiles"]) == (
        "o3",
        "never",
        {"fast": {"model": "o4"}},
    )
    assert codex["notify"] == ["/opt/cocoon/bin/cocoon-status", "done"]
    assert codex["model_providers"]["cocoon"]["base_url"] == "http://x/v1"
    assert codex["sandbox_mode"] == "danger-full-access"
    assert snapshots[1][2].startswith("# my favourite\n")  # the user's comments are kept

    write(".codex/config.toml", "model = [unclosed\n")
    broken = cocoond.post("agent.spawn", {"sandboxId": sandbox["id"], "profile": "codex"})
    assert broken.json()["error"]["code"] == "conflict"
    assert read(".codex/config.toml") == "model = [unclosed\n"  # refused, never overwritten


# What Codex 0.171's app-server (hooks/list) reported as the hash of each of cocoon's hooks.
CODEX_HOOK_HASHES = {
    "user_prompt_submit": "sha256:d6b899f0b17d8176f235ce26bf416f7dd053d9ed5046a264402a548f65648b5d",
    "permission_request": "sha256:8763fed67fa96ef54afa6b7eb412d3c047ab087c994a03dd006171fd56d1dbc3",
    "post_tool_use": "sha256:0d37f6a5c94df6da58225afc98727508b75eba864467e202fefdc457da6ed484",
}


def test_codex_hooks_join_the_users_and_only_cocoons_are_trusted():
    from agents.hooks import merge_codex_config

    mine = "[[hooks.PermissionRequest]]\n[[hooks.PermissionRequest.hooks]]\ntype = 'command'\ncommand = 'hi'"
    config = tomllib.loads(merge_codex_config(mine, {}))
    requests = [group["hooks"][0]["command"] for group in config["hooks"]["PermissionRequest"]]
    assert requests == ["hi", "/opt/cocoon/bin/cocoon-status blocked"]
    trusted = {key: entry["trusted_hash"] for key, entry in config["hooks"]["state"].items()}
    assert trusted == {
        "/home/agent/.codex/config.toml:user_prompt_submit:0:0": CODEX_HOOK_HASHES["user_prompt_submit"],
        "/home/agent/.codex/config.toml:permission_request:1:0": CODEX_HOOK_HASHES["permission_request"],
        "/home/agent/.codex/config.toml:post_tool_use:0:0": CODEX_HOOK_HASHES["post_tool_use"],
    }
    assert tomllib.loads(merge_codex_config(merge_codex_config(mine, {}), {})) == config  # a respawn


@pytest.mark.parametrize(
    ("hook", "report", "session"),
    [
        (
            "done 1796326052.9 0b0e4e6c-1c4f-4b4e-9a0e-3f0f1d2c3b4a",
            "done 1796326052.9",
            "0b0e4e6c-1c4f-4b4e-9a0e-3f0f1d2c3b4a",
        ),
        ("working 17.5\n", "working 17.5", ""),
        ("done 17.5 " + "a" * 65, "done 17.5 " + "a" * 65, ""),  # too long: the report is spoilt too
        ("done 17.5 $(reboot)", "done 17.5 $(reboot)", ""),
        ("done 17.5 -rf", "done 17.5 -rf", ""),
        ("done 17.5 ABCDEF", "done 17.5 ABCDEF", ""),
        ("exited 17.5 abcdef", "exited 17.5 abcdef", ""),  # not a status a hook may report
        ("done 17.5 abc def", "done 17.5 abc def", ""),
        ("done 1" + "0" * 90 + " abcdef", ("done 1" + "0" * 90 + " abcdef")[:100], ""),
    ],
)
def test_a_hook_report_names_the_cli_session_only_in_the_strict_form(hook, report, session):
    from agents import status
    from agents.poller import split_report

    assert split_report(hook) == (report, session)
    if not session and report != "working 17.5":
        assert status.parse_hook(report) is None  # a spoilt report is ignored as a whole


def test_the_watcher_takes_a_report_with_its_session_and_only_a_strict_one():
    from agents.stream import REPORT

    found = REPORT.fullmatch(b"ag_x1 done 17.5 0b0e4e6c-1c4f")
    assert found is not None
    assert found[2] == b"done 17.5 0b0e4e6c-1c4f"
    for bad in (b"ag_x1 done 17.5 $(id)", b"ag_x1 done 17.5 " + b"a" * 65, b"ag_x1 done 17.5 -rf"):
        assert REPORT.fullmatch(bad) is None
