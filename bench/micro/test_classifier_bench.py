"""Microbenchmark: classify the whole labelled shell corpus (run with --benchmark-only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from speculate.shell import classify

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "shell" / "corpus.yaml"
ROOT = "/srv/project"


def _commands() -> list[str]:
    data = yaml.safe_load(CORPUS.read_text())
    return [cmd.replace("{root}", ROOT) for section in data.values() for cmd in section]


@pytest.mark.benchmark(group="shell-classifier")
def test_classify_corpus(benchmark) -> None:
    commands = _commands()

    def run() -> int:
        return sum(classify(cmd, project_root=ROOT).sandboxable for cmd in commands)

    safe = benchmark(run)
    benchmark.extra_info["commands"] = len(commands)
    print(f"\nclassified {len(commands)} commands per round; {safe} sandboxable")
    assert 0 < safe < len(commands)


@pytest.mark.benchmark(group="shell-classifier")
def test_classify_one_pipeline(benchmark) -> None:
    command = "cd src && grep -rn TODO . | sort | uniq -c | sort -rn | head -20 > /tmp/todo.txt"
    got = benchmark(classify, command, project_root=ROOT)
    assert got.sandboxable and not got.read_only
