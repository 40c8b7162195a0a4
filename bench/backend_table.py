"""Two bench runs of the same scenarios on different backends, side by side, per arm: turn latency, the share
of input tokens read from the prompt cache, cost per turn (docs/claude-code.md has the claude-cli figures).

    .venv/bin/python -m bench.backend_table results/API results/CLI

Only turns present in both runs (same scenario, rep, arm and turn) are counted, so the rows compare like with
like; turns with an error or a simulator fallback are counted apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

Key = tuple[str, int, str, int]


def load(run: Path) -> tuple[str, dict[Key, dict[str, Any]]]:
    meta = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    turns = {}
    for line in (run / "turns.jsonl").read_text(encoding="utf-8").splitlines():
        t = json.loads(line)
        turns[(t["scenario"], t["rep"], t["arm"], t["turn"])] = t
    return str(meta.get("backend", run.name)), turns


def row(turns: list[dict[str, Any]]) -> dict[str, float]:
    ok = [t for t in turns if not t["error"] and not t["fallback"]]
    lat = [t["latency_s"] for t in ok]
    tok = [t["tokens"] or {} for t in ok]
    read = sum(x.get("cache_read_input_tokens", 0) for x in tok)
    total = sum(
        x.get("input_tokens", 0)
        + x.get("cache_creation_input_tokens", 0)
        + x.get("cache_read_input_tokens", 0)
        for x in tok
    )
    return {
        "turns": len(ok),
        "bad": len(turns) - len(ok),
        "p50": statistics.median(lat) if lat else 0.0,
        "mean": statistics.fmean(lat) if lat else 0.0,
        "read_share": read / total if total else 0.0,
        "cost": statistics.fmean(t["cost_usd"] or 0.0 for t in ok) if ok else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs=2, type=Path, metavar="RUN")
    a = ap.parse_args()
    (name_a, a_turns), (name_b, b_turns) = load(a.runs[0]), load(a.runs[1])
    both = sorted(set(a_turns) & set(b_turns))
    print(
        "| arm | backend | turns | turn latency p50 (s) | mean (s) | input read from cache | cost per turn (USD) |"
    )
    print("|---|---|---|---|---|---|---|")
    for arm in ("plain", "suggest", "speculative"):
        keys = [k for k in both if k[2] == arm]
        for name, turns in ((name_a, a_turns), (name_b, b_turns)):
            r = row([turns[k] for k in keys])
            bad = f" ({r['bad']:.0f} with an error or fallback, left out)" if r["bad"] else ""
            print(
                f"| {arm} | {name} | {r['turns']:.0f}{bad} | {r['p50']:.2f} | {r['mean']:.2f} | "
                f"{r['read_share']:.1%} | ${r['cost']:.4f} |"
            )


if __name__ == "__main__":
    main()
