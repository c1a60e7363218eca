"""One sandbox cannot take egress down for the others: tried from inside real egress sandboxes against
the real proxy container. Idle sockets beyond a per-source cap are answered 429 and the rest are closed
once the head deadline passes, while another sandbox's requests go through; a flood of denied random
names makes a bounded number of rows and events (yet every attempt is counted); a huge chunk streams
through with the proxy's memory bounded."""

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.test_egress import curl, sh

pytestmark = pytest.mark.e2e

MAX_PER_SOURCE = 512  # the proxy's cap (images/egress-proxy/proxy.py)
IDLE_SOCKETS = 600
FLOOD = 5000
CHUNK_MB = 256
PROXY_MEMORY_LIMIT_MB = 64


@pytest.fixture(scope="module")
def other(cocoond, egress, sandbox_image):
    sandbox = cocoond.call("sandbox.create", {"network": "egress", "image": sandbox_image})
    yield sandbox
    cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def test_idle_sockets_of_one_sandbox_get_429_beyond_its_cap_and_others_still_get_through(
    cocoond, egress, other, upstream
):
    # Sockets opened and left silent; those beyond the cap are answered at once. Then the first one is
    # read until the proxy closes it (EOF: status 1) or 30 s pass (status > 128).
    hold = (
        f"for i in $(seq {IDLE_SOCKETS}); do exec {{fd}}<>/dev/tcp/cocoon-proxy/3128 || break; "
        "fds+=($fd); done; touch /tmp/held; sleep 1; refused=0; "
        # Those beyond the cap wait longest in the proxy's accept queue: give them time to be answered.
        f'for i in "${{!fds[@]}}"; do t=0.005; [ $i -ge {MAX_PER_SOURCE} ] && t=5; '
        'read -r -t $t line <&${fds[$i]} && [[ $line == *" 429 "* ]] && refused=$((refused + 1)); done; '
        'read -r -t 30 line <&${fds[0]}; echo "opened ${#fds[@]} refused $refused first $?"'
    )
    with ThreadPoolExecutor(1) as pool:
        holding = pool.submit(sh, cocoond, egress, hold, timeoutS=120)
        wait_until(lambda: sh(cocoond, egress, "test -e /tmp/held")["exitCode"] == 0, timeout=60)
        assert curl(cocoond, other, "http://allowed.invalid/while-held") == (
            200,
            "upstream allowed.invalid /while-held",
        )
        words = holding.result()["stdout"].split()
    result = dict(zip(words[::2], map(int, words[1::2]), strict=True))
    assert result["opened"] == IDLE_SOCKETS
    assert result["refused"] == IDLE_SOCKETS - MAX_PER_SOURCE
    assert result["first"] == 1  # closed by the proxy: a silent head does not hold a place for long
    # The places are given back: the same sandbox gets through again.
    assert curl(cocoond, egress, "http://allowed.invalid/after")[0] == 200


def test_a_flood_of_denied_random_names_makes_bounded_rows_and_events(cocoond, egress):
    from egress.services import MAX_DENIED_HOSTS

    flood = (
        f"for i in $(seq {FLOOD}); do exec 3<>/dev/tcp/cocoon-proxy/3128; "
        "printf 'CONNECT r%s-%s.invalid:443 HTTP/1.1\\r\\n\\r\\n' $RANDOM $i >&3; read -r line <&3; "
        "exec 3<&-; done"
    )
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["egress.denied"], "sandboxId": egress["id"]})
        sh(cocoond, egress, flood, timeoutS=300)

        def rows():
            found = cocoond.call("egress.denied", {"sandboxId": egress["id"], "limit": 1000})
            flooded = [row for row in found if row["reason"] == "not_allowed"]
            return sum(row["count"] for row in flooded) >= FLOOD and flooded

        flooded = wait_until(rows, timeout=60, interval=1)
        events, deadline = [], time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                events.append(ws.next_event(timeout=1))
    assert sum(row["count"] for row in flooded) == FLOOD  # every attempt counted
    assert len(flooded) <= MAX_DENIED_HOSTS + 1  # the rest under one row
    assert {row["host"] for row in flooded if not row["host"].endswith(".invalid")} == {"*"}
    assert len(events) <= 2 * MAX_DENIED_HOSTS


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_huge_chunk_streams_through_with_the_proxy_memory_bounded(cocoond, egress, docker_client):
    proxy = docker_client.containers.get(f"{cocoond.instance}-egress-proxy")
    pid = proxy.attrs["State"]["Pid"]
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets the peak RSS
    size = CHUNK_MB << 20
    upload = (
        "exec 3<>/dev/tcp/cocoon-proxy/3128; "
        "{ printf 'POST http://allowed.invalid/sink HTTP/1.1\\r\\nHost: allowed.invalid\\r\\n"
        f"Transfer-Encoding: chunked\\r\\n\\r\\n%x\\r\\n' {size}; head -c {size} /dev/zero; "
        "printf '\\r\\n0\\r\\n\\r\\n'; } >&3; timeout 60 cat <&3"
    )
    answer = sh(cocoond, egress, upload, timeoutS=120)["stdout"]
    peak = _peak_rss_mb(pid)
    assert answer.endswith(f"received {size}"), answer[:300]
    assert proxy.id == docker_client.containers.get(proxy.name).id
    assert peak < PROXY_MEMORY_LIMIT_MB, peak
