"""The labelled screens and how cocoon's screen rules classify them; run as a script, it prints the
corpus accuracy (screens classified correctly / total) per profile and CLI version:

    PYTHONPATH=. .venv/bin/python tests/screens/corpus.py
"""

import os
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).parent
if __name__ == "__main__":  # the profiles are Django models' defaults: Django first
    sys.path.insert(0, str(HERE.parents[1]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()

from agents.profiles import BUILTIN_PROFILES  # noqa: E402
from agents.status import Memory, Observation, ScreenFacts, ScreenRules, decide, read_screen  # noqa: E402

NOW = 1_000_000.0


def screens() -> list[Path]:
    """<profile>/<version>/<label>-<what>.txt"""
    return sorted(HERE.glob("*/*/*.txt"))


def profile_version_label(path: Path) -> tuple[str, str, str]:
    return path.parent.parent.name, path.parent.name, path.name.split("-")[0]


def rules_of(profile: str) -> ScreenRules:
    fields = BUILTIN_PROFILES[profile]
    return ScreenRules.of(
        fields["command"],
        fields.get("hooks", False),
        fields.get("working_pattern", ""),
        fields.get("blocked_patterns", []),
    )


def classify(path: Path) -> str:
    """The status the screen rules give this screen once it has appeared and then stood still, past
    settling and the start-up grace; as after a task unless labelled idle (the screen alone cannot tell
    done from idle)."""
    profile, _version, label = profile_version_label(path)
    rules = rules_of(profile)
    facts = read_screen(rules, path.read_text())
    last_input = None if label == "idle" else NOW - 60
    before = Memory("unknown", NOW - 120, last_input, NOW - 50, ScreenFacts())
    appeared = decide(rules, before, Observation(alive=True, screen=facts), NOW - 40)
    after = Memory(appeared.status, NOW - 120, last_input, NOW - 40, facts)
    return decide(rules, after, Observation(alive=True), NOW).status


def accuracy(paths: list[Path]) -> tuple[dict[tuple[str, str], tuple[int, int]], list[str]]:
    """(correct, total) per (profile, version), and the misclassified screens as text."""
    correct: Counter[tuple[str, str]] = Counter()
    total: Counter[tuple[str, str]] = Counter()
    wrong = []
    for path in paths:
        profile, version, label = profile_version_label(path)
        status = classify(path)
        total[profile, version] += 1
        if status == label:
            correct[profile, version] += 1
        else:
            wrong.append(f"{path.relative_to(HERE)}: {status}, labelled {label}")
    return {key: (correct[key], count) for key, count in total.items()}, wrong


def report(tally: dict[tuple[str, str], tuple[int, int]]) -> str:
    lines = [f"{profile} {version}: {right}/{count}" for (profile, version), (right, count) in tally.items()]
    right, count = (sum(column) for column in zip(*tally.values(), strict=True))
    return "\n".join([*lines, f"all: {right}/{count}"])


if __name__ == "__main__":
    tally, wrong = accuracy(screens())
    print(report(tally), *wrong, sep="\n")
