"""Capture the labelled screen corpus from the real Claude Code and Codex CLIs of the toolbox, run
against the local LLM stand-ins (a delayed answer shows the working screen). Run by hand after a CLI
update, then look at every file before committing it:

    PYTHONPATH=. .venv/bin/python tests/screens/capture.py
"""

import os
import sys
import time
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, sandbox_image  # noqa: E402
from tests.llm_standin import AnthropicStandIn, OpenAIStandIn  # noqa: E402

HERE = Path(__file__).parent
DELAY = 8
CACHE = os.environ.get("COCOON_TOOLBOX_CACHE", "/var/cache/cocoon-ci/toolbox")  # npm staging, reused


def main() -> None:
    sandbox_image()
    with cocoond(COCOON_TOOLBOX_CACHE=CACHE) as server:
        with server.ws() as ws:
            ws.call("events.subscribe", {"types": ["toolbox.install"]})
            server.call("toolbox.install")
            status = None
            while status not in {"done", "failed"}:
                status = ws.next_event(timeout=900)["event"]["data"]["status"]
        sandbox = server.call("sandbox.create", {"network": "open"})
        network = docker.from_env().networks.get(f"{server.instance}-outbound")
        gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
        if "codex" not in sys.argv[1:]:
            capture_claude(server, gateway, sandbox)
        if "claude-code" not in sys.argv[1:]:
            capture_codex(server, gateway, server.call("sandbox.create", {"network": "open"}))


def save(server, agent, name: str) -> None:
    screen = server.call("agent.read", {"agentId": agent["id"]})["screen"]
    path = HERE / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(screen)
    print(f"--- {name}\n{screen}")


def spawn(server, sandbox, profile: str, prompt: str | None = None, **env: str) -> dict:
    params = {"sandboxId": sandbox["id"], "profile": profile, "env": env}
    if prompt:
        params["prompt"] = prompt
    return server.call("agent.spawn", params)


def wait(server, agent, status: str) -> None:
    server.call("agent.wait", {"agentId": agent["id"], "until": [status], "timeoutS": 120})


def capture_claude(server, gateway: str, sandbox: dict) -> None:
    server.call("secrets.set", {"name": "ANTHROPIC_API_KEY", "value": "sk-ant-standin-0123456789abcdefghij"})
    # Claude Code's requests carry "run" in more than the prompt: the chat gets a stand-in that never
    # calls a tool, the permission prompt one that does.
    llm = AnthropicStandIn(gateway, delay=DELAY, trigger="\0")
    asking_llm = AnthropicStandIn(gateway, delay=DELAY, command="echo approved > /workspace/ran.txt")
    agent = spawn(server, sandbox, "claude-code", ANTHROPIC_BASE_URL=llm.url)
    time.sleep(8)
    save(server, agent, "claude-code/idle-start.txt")
    server.call("agent.send_input", {"agentId": agent["id"], "text": "Say hello."})
    time.sleep(DELAY / 2)
    save(server, agent, "claude-code/working-waiting-for-the-model.txt")
    wait(server, agent, "done")
    time.sleep(1)
    save(server, agent, "claude-code/done-reply.txt")
    asking = spawn(
        server, sandbox, "claude-code", "Please run the command.", ANTHROPIC_BASE_URL=asking_llm.url
    )
    wait(server, asking, "blocked")
    time.sleep(1)
    save(server, asking, "claude-code/blocked-bash-permission.txt")
    server.call("agent.send_keys", {"agentId": asking["id"], "keys": ["Enter"]})
    time.sleep(DELAY / 2)
    save(server, asking, "claude-code/working-after-approval.txt")
    wait(server, asking, "done")
    time.sleep(1)
    save(server, asking, "claude-code/done-after-a-command.txt")
    llm.close()
    asking_llm.close()


def capture_codex(server, gateway: str, sandbox: dict) -> None:
    server.call("secrets.set", {"name": "OPENAI_API_KEY", "value": "sk-openai-standin-0123456789abcdefghij"})
    llm = OpenAIStandIn(gateway, delay=DELAY)
    agent = spawn(server, sandbox, "codex", OPENAI_BASE_URL=llm.url)
    time.sleep(8)
    save(server, agent, "codex/idle-start.txt")
    time.sleep(3)
    again = server.call("agent.read", {"agentId": agent["id"]})["screen"]
    print("codex's idle screen moves by itself:", again != (HERE / "codex/idle-start.txt").read_text())
    server.call("agent.send_input", {"agentId": agent["id"], "text": "Say hello."})
    time.sleep(DELAY / 2)
    save(server, agent, "codex/working-waiting-for-the-model.txt")
    wait(server, agent, "done")
    time.sleep(1)
    save(server, agent, "codex/done-reply.txt")
    llm.close()


if __name__ == "__main__":
    main()
