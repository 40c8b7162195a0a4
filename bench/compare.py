"""``speculate bench --compare A B``: two runs' headline figures side by side (with their 95% CIs where the
run has one), as a Markdown table. Runs made with different settings (time scale, backend, scenarios,
conditions, reps, arms) measure different things: refused unless ``--force``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (label, path into summary.json, is a fraction)
ROWS: list[tuple[str, tuple[str, ...], bool]] = [
    ("plain turn latency p50 (s)", ("arms", "plain", "turn_latency_s", "p50"), False),
    ("plain turn latency p90 (s)", ("arms", "plain", "turn_latency_s", "p90"), False),
    ("spec turn latency p50 (s)", ("arms", "speculative", "turn_latency_s", "p50"), False),
    ("spec turn latency p90 (s)", ("arms", "speculative", "turn_latency_s", "p90"), False),
    ("spec turn latency p99 (s)", ("arms", "speculative", "turn_latency_s", "p99"), False),
    ("plain session wall p50 (s)", ("arms", "plain", "session_wall_s", "p50"), False),
    ("spec session wall p50 (s)", ("arms", "speculative", "session_wall_s", "p50"), False),
    ("suggest turn latency p50 (s)", ("arms", "suggest", "turn_latency_s", "p50"), False),
    (
        "saved per accepted turn vs suggest (s)",
        ("vs", "suggest", "saved_per_accepted_turn_s", "median"),
        False,
    ),
    ("saved per later turn vs suggest (s)", ("vs", "suggest", "saved_per_later_turn_s", "mean"), False),
    ("saved per later turn vs plain (s)", ("vs", "plain", "saved_per_later_turn_s", "mean"), False),
    ("accepted", ("accepted",), False),
    ("acceptance rate", ("acceptance_rate",), True),
    ("suggestion coverage", ("suggestion_coverage",), True),
    ("time saved median (s)", ("time_saved_s", "median"), False),
    ("mean saving per later turn (s)", ("latency_diff_per_turn_s", "mean"), False),
    ("efficiency (pooled)", ("efficiency", "pooled"), True),
    ("fork cache-read share", ("fork_cache_read_share",), True),
    ("plain cost (USD)", ("cost_usd", "plain"), False),
    ("spec cost (USD)", ("cost_usd", "speculative"), False),
    ("cost per second saved (USD)", ("cost_per_second_saved_usd",), False),
    ("wasted tokens", ("wasted_tokens",), False),
    ("leaks", ("leaks",), False),
]


def load_summary(p: Path) -> dict[str, Any]:
    path = p / "summary.json" if p.is_dir() else p
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"--compare {p}: cannot read {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"--compare {p}: {path} is not valid JSON: {e}") from None


def _get(d: dict[str, Any], path: tuple[str, ...]) -> Any:
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


# Settings that must match for two runs' numbers to be comparable.
SETTINGS = ("backend", "time_scale", "scenarios", "conditions", "reps", "mode", "arms", "user_edit_prob")


def differing_settings(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [
        f"{k}: {_setting(a, k)!r} vs {_setting(b, k)!r}" for k in SETTINGS if _setting(a, k) != _setting(b, k)
    ]


def _setting(s: dict[str, Any], key: str) -> Any:
    # summary.json's `arms` is the per-arm figures (the run's list of arms is overwritten by them): compare
    # which arms ran, not their numbers, or no two runs would ever compare.
    v = s.get(key)
    return sorted(v) if key == "arms" and isinstance(v, dict) else v


def _ci_path(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """Where a row's CI lives: next to a median/mean that has a ci95 sibling."""
    return (*path[:-1], "ci95") if path[-1] in ("median", "mean") else None


def compare_markdown(a: dict[str, Any], b: dict[str, Any], name_a: str = "A", name_b: str = "B") -> str:
    def cell(v: Any, frac: bool) -> str:
        if v is None:
            return "—"
        if frac:
            return f"{100 * v:.0f}%"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    def with_ci(d: dict[str, Any], path: tuple[str, ...], frac: bool) -> str:
        text = cell(_get(d, path), frac)
        cp = _ci_path(path)
        c = _get(d, cp) if cp else None
        if isinstance(c, list) and len(c) == 2:
            text += " [" + ", ".join("∞" if x is None else f"{x:.3g}" for x in c) + "]"
        return text

    lines = [f"| | {name_a} | {name_b} | Δ |", "|---|---|---|---|"]
    for label, path, frac in ROWS:
        va, vb = _get(a, path), _get(b, path)
        delta = "—"
        if isinstance(va, int | float) and isinstance(vb, int | float):
            delta = f"{100 * (vb - va):+.0f} pp" if frac else (f"{vb - va:+.4g}")
        lines.append(f"| {label} | {with_ci(a, path, frac)} | {with_ci(b, path, frac)} | {delta} |")
    setup: Callable[[dict[str, Any]], str] = lambda s: (  # noqa: E731
        f"backend {s.get('backend')}, seed {s.get('seed')}, time scale {s.get('time_scale')}, "
        f"reps {s.get('reps')}, concurrency {s.get('concurrency')}, condition `{s.get('primary_condition')}`"
    )
    return "\n".join([f"{name_a}: {setup(a)}", f"{name_b}: {setup(b)}", "", *lines, ""])


def compare_main(a: Path, b: Path, *, force: bool = False) -> int:
    try:
        sa, sb = load_summary(a), load_summary(b)
    except ValueError as e:
        print(f"speculate bench: error: {e}", file=sys.stderr)
        return 2
    diff = differing_settings(sa, sb)
    if diff and not force:
        print(
            f"speculate bench: error: --compare {a} {b}: the runs differ in "
            + "; ".join(diff)
            + " (their numbers are not comparable; --force compares anyway)",
            file=sys.stderr,
        )
        return 2
    if diff:
        print("**Settings differ** (compared with --force): " + "; ".join(diff) + "\n")
    print(compare_markdown(sa, sb, str(a), str(b)))
    return 0
