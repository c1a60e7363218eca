"""The web UI in headless Chromium: dashboard first paint with many rows, and keystroke echo latency
in the browser terminal next to the attach WebSocket alone, in the same run.

Starts its own cocoond. The 50 sandboxes / 200 agents of the dashboard are database rows made directly
(no containers: the page renders rows, and 50 real sandboxes would measure Docker, not the UI); they are
"stopped" so the poller leaves them alone. The echo is measured on one real sandbox with a shell agent:
in the browser from the keydown to the character drawn in xterm's DOM, and over a bare attach
WebSocket from sending the byte to receiving its echo.

    .venv/bin/python bench/ui.py [--loads 10] [--keys 50]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, sandbox_image  # noqa: E402
from bench.sandboxes import percentile  # noqa: E402
from tests.conftest import server_env  # noqa: E402

FAKE_ROWS = """
from agents.models import Agent
from sandboxes.models import Sandbox
for n in range(50):
    sandbox = Sandbox.objects.create(name=f"bench-{n}", image="cocoon-sandbox:latest", network="none",
                                     cpus=2, memory_mb=4096, pids=1024, driver="docker", state="stopped")
    Agent.objects.bulk_create([Agent(sandbox=sandbox, profile="shell", status="idle") for _ in range(4)])
"""
# Resolves with the milliseconds from the next keydown until `expected` shows in the terminal's DOM.
MEASURE_ECHO = """expected => new Promise(resolve => {
  const rows = document.querySelector('.xterm-rows');
  let start = null;
  document.addEventListener('keydown', () => { start = performance.now(); }, {once: true, capture: true});
  const observer = new MutationObserver(() => {
    if (start !== null && rows.textContent.includes(expected)) {
      observer.disconnect();
      resolve(performance.now() - start);
    }
  });
  observer.observe(rows, {subtree: true, childList: true, characterData: true});
})"""


# Paint entries may come after "load": wait for first-contentful-paint through a buffered observer.
FIRST_PAINT = """() => new Promise(resolve => new PerformanceObserver((list, observer) => {
  const paint = list.getEntriesByName('first-contentful-paint')[0];
  if (paint) {
    observer.disconnect();
    resolve({paint: paint.startTime, response: performance.getEntriesByType('navigation')[0].responseEnd});
  }
}).observe({type: 'paint', buffered: true}))"""


def summary(name: str, values: list[float]) -> str:
    return f"{name:<44} {statistics.median(values):>9.1f} {percentile(values, 0.95):>7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--keys", type=int, default=50)
    args = parser.parse_args()

    sandbox_image()
    with cocoond() as server, sync_playwright() as playwright:
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", FAKE_ROWS],
            cwd=ROOT,
            env=server_env(COCOON_DATA=str(server.data)),
            check=True,
        )
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        page.goto(f"{server.url}/login")
        page.fill("#token", server.token)
        page.click("button[type=submit]")

        paints, responses = [], []
        for _ in range(args.loads):
            page.goto(server.url, wait_until="load")
            timing = page.evaluate(FIRST_PAINT)
            paints.append(timing["paint"])
            responses.append(timing["response"])
        rows = page.locator("[data-agent]").count(), page.locator("tr[data-sandbox]").count()

        # What a live piece costs (an agent's card rendered for the dashboard to swap in) next to the API's
        # answer about the same agent, and a searched list next to the whole one.
        card_agent = page.locator(".card[data-agent]").first.get_attribute("data-agent")
        pieces = {
            "agent card (GET /agents/<id>/card)": lambda: page.request.get(
                f"{server.url}/agents/{card_agent}/card"
            ),
            "agent.get over RPC": lambda: page.request.post(
                f"{server.url}/v1/rpc/agent.get",
                data={"agentId": card_agent},
                headers={"Authorization": f"Bearer {server.token}"},
            ),
            "agents page, all 200": lambda: page.request.get(f"{server.url}/agents/"),
            "agents page, searched (?q=bench-7)": lambda: page.request.get(f"{server.url}/agents/?q=bench-7"),
        }
        piece_ms: dict[str, list[float]] = {name: [] for name in pieces}
        for _ in range(args.loads * 3):
            for name, fetch in pieces.items():  # interleaved: no one of them gets the quiet moments
                started = time.perf_counter()
                assert fetch().ok, name
                piece_ms[name].append((time.perf_counter() - started) * 1000)

        sandbox = server.call("sandbox.create", {"network": "none"})
        agent = server.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
        page.goto(f"{server.url}/agents/{agent['id']}/")
        page.wait_for_selector("#terminal[data-connected='1']")
        page.click("#terminal")
        typed, browser_ms = "", []
        for index in range(args.keys):
            key = "abcdefghij"[index % 10]
            typed += key
            # Kept on window: handing the promise back would make Playwright wait for it before the key.
            page.evaluate(f"expected => {{ window.echo = ({MEASURE_ECHO})(expected); }}", typed)
            page.keyboard.press(key)
            browser_ms.append(page.evaluate("() => window.echo"))
        page.keyboard.press("Control+u")
        browser.close()

        socket_ms = []
        url = f"ws://127.0.0.1:{server.port}/v1/agents/{agent['id']}/attach?cols=120&rows=40&token={server.token}"
        with connect(url) as socket:
            time.sleep(1)
            while True:  # drain the initial screen
                try:
                    socket.recv(timeout=0.5)
                except TimeoutError:
                    break
            for index in range(args.keys):
                key = "klmnopqrst"[index % 10].encode()
                started = time.perf_counter()
                socket.send(key)
                while key not in socket.recv(timeout=5):
                    pass
                socket_ms.append((time.perf_counter() - started) * 1000)

    print(f"dashboard with {rows[1]} sandboxes / {rows[0]} agents (database rows), {args.loads} loads\n")
    print(f"{'':<44} {'median ms':>9} {'p95 ms':>7}")
    print(summary("first contentful paint", paints))
    print(summary("HTML response complete", responses))
    print(f"\nlive pieces and searched lists, {args.loads * 3} requests each\n")
    print(f"{'':<44} {'median ms':>9} {'p95 ms':>7} {'ratio':>7}")
    baselines = {"agent card (GET /agents/<id>/card)": "agent.get over RPC"}
    baselines["agents page, searched (?q=bench-7)"] = "agents page, all 200"
    for name, values in piece_ms.items():
        base = baselines.get(name)
        ratio = statistics.median(values) / statistics.median(piece_ms[base]) if base else 1.0
        print(f"{summary(name, values)} {ratio:>6.2f}x")
    print(f"\nkeystroke echo of a shell agent, {args.keys} keys each\n")
    print(f"{'':<44} {'median ms':>9} {'p95 ms':>7}")
    print(summary("browser: keydown to glyph in xterm DOM", browser_ms))
    print(summary("attach WebSocket alone: send to echo", socket_ms))


if __name__ == "__main__":
    main()
