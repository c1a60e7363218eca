"""What the open sandboxes' fence (egress.fence) costs a create: open sandbox.create with the fence in
force against the same with it taken off, interleaved in the same run, and a plain `docker run -d` on a
bridge network of its own as the baseline; then how long egress.set_fence takes (a helper container).

The fence matches the sandbox subnets, not each sandbox, so a create should cost the same either way.

    .venv/bin/python bench/fence.py [--runs 10]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import IMAGE, cocoond, sandbox_image  # noqa: E402
from tests.conftest import remove_fence, wait_until  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    client = sandbox_image()
    network = client.networks.create(f"cocoonbench-fence-{time.monotonic_ns()}", driver="bridge")
    try:
        with cocoond() as server:
            call = server.call

            def fence_ok() -> bool:
                items = call("system.setup_status", {})["items"]
                return next(item for item in items if item["key"] == "openFence")["ok"]

            wait_until(fence_ok, timeout=120)
            call("sandbox.create", {"network": "open", "image": IMAGE})  # the proxy and networks warm
            plain, fenced, unfenced, setting = [], [], [], []
            for _ in range(args.runs):
                started = time.perf_counter()
                made = subprocess.run(
                    ["docker", "run", "-d", "--network", network.name, IMAGE, "sleep", "infinity"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                plain.append(time.perf_counter() - started)
                client.containers.get(made.stdout.strip()).remove(force=True)
                for fence_in_force, times in ((True, fenced), (False, unfenced)):
                    if fence_in_force:
                        started = time.perf_counter()
                        call("egress.set_fence", {})
                        setting.append(time.perf_counter() - started)
                    else:
                        remove_fence(server.instance)
                    started = time.perf_counter()
                    sandbox = call("sandbox.create", {"network": "open", "image": IMAGE})
                    times.append(time.perf_counter() - started)
                    call("sandbox.delete", {"sandboxId": sandbox["id"]})
    finally:
        network.remove()

    base = statistics.median(plain)
    print(f"sequential creates, {args.runs} each, image {IMAGE}, network open (plain: a bridge of its own)\n")
    print(f"{'':<40} {'median s':>9} {'ratio to docker run':>20}")
    for label, values in (
        ("docker run -d ... sleep infinity", plain),
        ("sandbox.create open, fence in force", fenced),
        ("sandbox.create open, fence taken off", unfenced),
    ):
        print(f"{label:<40} {statistics.median(values):>9.3f} {statistics.median(values) / base:>19.2f}x")
    ratio = statistics.median(fenced) / statistics.median(unfenced)
    setting_median = statistics.median(setting)
    print(f"\nfenced / unfenced create: {ratio:.2f}x; egress.set_fence: median {setting_median:.2f} s")


if __name__ == "__main__":
    main()
