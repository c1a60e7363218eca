"""Where a secret could leak from inside a sandbox: every process's environment and argv, the files an
agent can write, and the container's definition."""

import json
from typing import Any

# The secret goes in on stdin: on grep's command line it would find itself.
SEARCH = (
    "grep -rlsFf /dev/stdin /proc/[0-9]*/environ /proc/[0-9]*/cmdline /home /tmp /workspace /opt/cocoon; true"
)


def assert_secret_absent(cocoond: Any, sandbox: dict[str, Any], secret: str, docker_client: Any) -> None:
    found = cocoond.call(
        "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["bash", "-c", SEARCH], "stdin": secret}
    )
    assert found["stdout"] == "", found
    container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")
    assert secret not in json.dumps(container.attrs)
