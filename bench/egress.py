"""The egress proxy next to a direct connection, measured in the same run.

A cocoond of its own, a recording stand-in 'internet' (tests/upstream.py: its own network namespace,
TLS with a test CA), one egress sandbox (through the proxy) and one open sandbox (direct). Reports:

- throughput of a --megabytes download over HTTPS: through the allowlist proxy (CONNECT) vs direct;
- added latency: --requests sequential small HTTPS requests, each a new curl and connection;
- SSE time to first byte through the credential proxy vs direct to the same upstream;
- concurrent CONNECT tunnels held open at once (--tunnels, target 500) and how many failed;
- --idle idle sockets (target 1,000) held open by one sandbox: how many the proxy answered 429 and
  whether another egress sandbox's requests still go through meanwhile (and how fast);
- the proxy's peak RSS during a --upload-mb upload (target 1 GB) sent as one chunk: target < 64 MB.

    .venv/bin/python bench/egress.py [--megabytes 200] [--requests 30] [--tunnels 500] [--idle 1000]
                                     [--upload-mb 1024]
"""

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, reset_peak, rss_mb, sandbox_image  # noqa: E402
from tests.upstream import NAMES, STANDIN_KEY, public_upstream  # noqa: E402

HOLD_S = 8


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--tunnels", type=int, default=500)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--upload-mb", type=int, default=1024)
    args = parser.parse_args()

    sandbox_image()
    with (
        tempfile.TemporaryDirectory() as folder,
        public_upstream(Path(folder)) as upstream,
        cocoond() as server,
    ):
        server.call(
            "settings.update",
            {
                "egress": {
                    "allowlist": ["allowed.invalid", "llm.invalid"],
                    "hosts": {name: upstream.address for name in NAMES},
                    "caBundle": upstream.ca_pem,
                },
                "providers": {
                    "standin": {
                        "kind": "http",
                        "baseUrl": "https://llm.invalid",
                        "secret": "K",
                        "auth": "bearer",
                    }
                },
                "sandbox": {"maxLimits": {"cpus": 8, "memoryMb": 16384, "pids": 8192}},
            },
        )
        server.call("secrets.set", {"name": "K", "value": STANDIN_KEY})
        limits = {"cpus": 2, "memoryMb": 2048, "pids": 4096}
        proxied = server.call("sandbox.create", {"network": "egress", "limits": limits})
        direct = server.call("sandbox.create", {"network": "open", "limits": limits})
        neighbour = server.call("sandbox.create", {"network": "egress", "limits": limits})

        def sh(sandbox: dict, script: str, stdin: str | None = None) -> str:
            params = {"sandboxId": sandbox["id"], "command": ["bash", "-c", script], "timeoutS": 600}
            result = server.call("sandbox.exec", params | ({"stdin": stdin} if stdin else {}))
            return result["stdout"]

        for sandbox in (proxied, direct, neighbour):
            sh(sandbox, "cat > /tmp/ca.pem", stdin=upstream.ca_pem)
        # The open sandbox resolves the stand-in's names by itself (what DNS would do).
        pin = " ".join(f"--resolve {name}:443:{upstream.address}" for name in NAMES)
        curl = {
            proxied["id"]: "curl -sS --cacert /tmp/ca.pem",
            direct["id"]: f"curl -sS --noproxy '*' --cacert /tmp/ca.pem {pin}",
            neighbour["id"]: "curl -sS --cacert /tmp/ca.pem",
        }

        def curl_in(sandbox: dict, arguments: str) -> str:
            return sh(sandbox, f"{curl[sandbox['id']]} {arguments}")

        size = args.megabytes * 1024 * 1024
        speed = {}
        for name, sandbox in (("proxy", proxied), ("direct", direct)):
            runs = [
                float(
                    curl_in(
                        sandbox, f"-o /dev/null -w '%{{speed_download}}' https://allowed.invalid/bytes/{size}"
                    )
                )
                for _ in range(3)
            ]
            speed[name] = statistics.median(runs) / 1e6
        print(
            f"throughput  proxy {speed['proxy']:.0f} MB/s  direct {speed['direct']:.0f} MB/s  "
            f"ratio {speed['proxy'] / speed['direct']:.2f}x"
        )

        latency = {}
        timed = "-o /dev/null -w '%{time_total}\\n' https://allowed.invalid/small"
        for name, sandbox in (("proxy", proxied), ("direct", direct)):
            out = sh(sandbox, f"for i in $(seq {args.requests}); do {curl[sandbox['id']]} {timed}; done")
            latency[name] = statistics.median(float(line) for line in out.split()) * 1000
        print(
            f"request     proxy {latency['proxy']:.1f} ms  direct {latency['direct']:.1f} ms  "
            f"added {latency['proxy'] - latency['direct']:.1f} ms  "
            f"ratio {latency['proxy'] / latency['direct']:.2f}x"
        )

        agent = server.call(
            "agent.spawn", {"sandboxId": proxied["id"], "profile": "shell", "providers": ["standin"]}
        )
        server.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
        server.call("agent.send_input", {"agentId": agent["id"], "text": "echo $STANDIN_API_KEY > /tmp/key"})
        placeholder = sh(proxied, "sleep 1; cat /tmp/key").strip()
        ttfb = {}
        first_byte = "-o /dev/null -w '%{time_starttransfer}\\n'"
        sse = {
            "credential proxy": (
                proxied,
                f"curl -sS -N -H 'Authorization: Bearer {placeholder}' {first_byte} "
                "http://cocoon-proxy:8080/p-standin/sse",
            ),
            "direct": (
                direct,
                f"{curl[direct['id']]} -N -H 'Authorization: Bearer {STANDIN_KEY}' {first_byte} "
                "https://llm.invalid/sse",
            ),
        }
        for name, (sandbox, command) in sse.items():
            out = sh(sandbox, f"for i in $(seq 10); do {command}; done")
            ttfb[name] = statistics.median(float(line) for line in out.split()) * 1000
        print(
            f"SSE TTFB    credential proxy {ttfb['credential proxy']:.1f} ms  "
            f"direct {ttfb['direct']:.1f} ms  ratio {ttfb['credential proxy'] / ttfb['direct']:.2f}x"
        )

        hold = (
            "for i in $(seq {n}); do ( exec 3<>/dev/tcp/cocoon-proxy/3128 || exit 1; "
            "printf 'CONNECT allowed.invalid:80 HTTP/1.1\\r\\n\\r\\n' >&3; read -r -t 20 line <&3; "
            "[[ $line == *' 200 '* ]] || exit 1; read -r -t 20 blank <&3; "
            # Held: nothing arrives and the tunnel stays open until read times out (status > 128).
            "read -r -t {hold} rest <&3; [ $? -gt 128 ] && echo held ) & done; wait"
        )
        proxy = docker.from_env().containers.get(f"{server.instance}-egress-proxy")
        proxy_pid = proxy.attrs["State"]["Pid"]
        with ThreadPoolExecutor(1) as pool:
            holding = pool.submit(sh, proxied, hold.format(n=args.tunnels, hold=HOLD_S))
            started = time.monotonic()
            tasks = Path(f"/proc/{proxy_pid}/task")
            peak = 0  # the proxy's threads beyond its own three: one per open tunnel
            while not holding.done():
                peak = max(peak, len(list(tasks.iterdir())) - 3)
                time.sleep(0.1)
            held = holding.result().split().count("held")
            took = time.monotonic() - started
        print(
            f"tunnels     {held}/{args.tunnels} CONNECTs held for {HOLD_S} s (all done in {took:.1f} s); "
            f"peak open at once in the proxy: {peak}"
        )

        idle_sockets(sh, curl_in, proxied, neighbour, args.idle)
        upload(sh, proxied, proxy_pid, args.upload_mb)


def idle_sockets(sh: Callable, curl_in: Callable, holder: dict, neighbour: dict, count: int) -> None:
    """count silent sockets from one sandbox; meanwhile another one's requests must go through."""
    hold = (
        f"for i in $(seq {count}); do exec {{fd}}<>/dev/tcp/cocoon-proxy/3128 || break; fds+=($fd); done; "
        "touch /tmp/held; sleep 3; refused=0; "
        'for fd in "${fds[@]}"; do read -r -t 0.005 line <&$fd && [[ $line == *" 429 "* ]] '
        '&& refused=$((refused + 1)); done; echo "${#fds[@]} $refused"; sleep 4'
    )
    timed = "-o /dev/null -w '%{http_code} %{time_total}\\n' https://allowed.invalid/small"
    with ThreadPoolExecutor(1) as pool:
        holding = pool.submit(sh, holder, f"rm -f /tmp/held; {hold}")
        while sh(holder, "test -e /tmp/held && echo yes").strip() != "yes":
            time.sleep(0.2)
        replies = [curl_in(neighbour, timed).split() for _ in range(20)]
        opened, refused = (int(word) for word in holding.result().split())
    ok = sum(code == "200" for code, _ in replies)
    latency = statistics.median(float(seconds) for _, seconds in replies) * 1000
    print(
        f"idle        {opened} idle sockets from one sandbox, {refused} answered 429; another sandbox "
        f"meanwhile: {ok}/{len(replies)} requests ok, median {latency:.1f} ms"
    )


def upload(sh: Callable, sandbox: dict, proxy_pid: int, megabytes: int) -> None:
    """One chunk of megabytes through the proxy to the stand-in; the proxy's peak RSS meanwhile."""
    size = megabytes << 20
    reset_peak(proxy_pid)
    before = rss_mb(proxy_pid)
    script = (
        "exec 3<>/dev/tcp/cocoon-proxy/3128; "
        "{ printf 'POST http://allowed.invalid/sink HTTP/1.1\\r\\nHost: allowed.invalid\\r\\n"
        f"Transfer-Encoding: chunked\\r\\n\\r\\n%x\\r\\n' {size}; head -c {size} /dev/zero; "
        "printf '\\r\\n0\\r\\n\\r\\n'; } >&3; timeout 120 cat <&3"
    )
    started = time.monotonic()
    answer = sh(sandbox, script)
    took = time.monotonic() - started
    print(
        f"upload      {megabytes} MB as one chunk in {took:.1f} s ({megabytes / took:.0f} MB/s), "
        f"{'received' if answer.endswith(f'received {size}') else 'NOT received'}; proxy RSS "
        f"{before:.1f} MB before, peak {rss_mb(proxy_pid, peak=True):.1f} MB (target < 64)"
    )


if __name__ == "__main__":
    main()
