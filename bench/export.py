"""``speculate bench export RUN --format parquet|csv``: one row per turn, for pandas, polars or R.

A row is one turn of one arm: which session it belongs to (arm, scenario, rep, condition and the
condition's parameters), what the user did (think and input time, Tab or typed), what it took (latency,
time to first token, requests, tokens), what it cost (the main loop's, and the suggestion and fork made
for it: ``total_cost_usd`` adds up to the session's cost) and how it ended (``outcome``: first_turn,
accepted, miss, no_suggestion). Reads a results directory or a kept headline (whose records are
gzipped). CSV needs nothing; Parquet needs pyarrow (``pip install -e ".[export]"``).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.pairs import Records
from bench.records import BenchSpeculationEvent, TurnRecord

# (column, type) in order; types are str, int, float, bool (any may be null).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "str"),
    ("session", "str"),
    ("pair", "str"),
    ("arm", "str"),
    ("scenario", "str"),
    ("rep", "int"),
    ("seed", "int"),
    ("cond", "int"),
    ("condition", "str"),
    ("think_model", "str"),
    ("accept_prob", "float"),
    ("model_name", "str"),
    ("typing_cps", "float"),
    ("tab_s", "float"),
    ("sim", "str"),
    ("turn", "int"),
    ("think_s", "float"),
    ("input_s", "float"),
    ("input", "str"),
    ("latency_s", "float"),
    ("ttft_s", "float"),
    ("requests", "int"),
    ("input_tokens", "int"),
    ("output_tokens", "int"),
    ("cache_creation_input_tokens", "int"),
    ("cache_read_input_tokens", "int"),
    ("cost_usd", "float"),
    ("suggestion_cost_usd", "float"),
    ("fork_cost_usd", "float"),
    ("total_cost_usd", "float"),
    ("outcome", "str"),
    ("suggestion_offered", "bool"),
    ("accepted", "bool"),
    ("miss_kind", "str"),
    ("speculation_outcome", "str"),
    ("engine_time_saved_s", "float"),
    ("fork_checked", "int"),
    ("user_edit", "str"),
    ("error", "str"),
)
FORMATS = ("parquet", "csv")


def outcome(t: TurnRecord) -> str:
    """first_turn; accepted (the fork used, or in the suggest arm the suggestion taken); miss (a suggestion
    was offered and the user typed their own prompt); no_suggestion."""
    if t.turn == 0:
        return "first_turn"
    if t.accepted:
        return "accepted"
    if t.suggestion_shown is not None or t.suggestion_at_submit is not None:
        return "miss"
    return "no_suggestion"


def rows(records: Records, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per turn record, with its condition's parameters and the engine costs made for it."""
    params = summary.get("condition_params") or []
    spend: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: {"suggestion": 0.0, "fork": 0.0})
    for e in records.events:
        kind = "fork" if isinstance(e, BenchSpeculationEvent) else "suggestion"
        spend[e.session, e.turn][kind] += e.cost_usd
    out = []
    for t in sorted(records.turns, key=lambda t: (t.cond, t.scenario, t.rep, t.arm, t.turn)):
        p = params[t.cond] if t.cond < len(params) else {}
        s = spend.get((t.session, t.turn), {"suggestion": 0.0, "fork": 0.0})
        spec = t.speculation
        out.append(
            {
                "run_id": summary.get("run_id"),
                "session": t.session,
                "pair": t.pair,
                "arm": t.arm,
                "scenario": t.scenario,
                "rep": t.rep,
                "seed": t.seed,
                "cond": t.cond,
                "condition": t.condition,
                "think_model": t.think_model,
                "accept_prob": t.accept_prob,
                "model_name": t.model_name,
                "typing_cps": p.get("typing_cps"),
                "tab_s": p.get("tab_s"),
                "sim": p.get("sim", "ideal"),
                "turn": t.turn,
                "think_s": t.think_s,
                "input_s": t.input_s,
                "input": t.input,
                "latency_s": t.latency_s,
                "ttft_s": t.ttft_s,
                "requests": t.requests,
                **{
                    k: int(t.tokens.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "output_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                },
                "cost_usd": t.cost_usd,
                "suggestion_cost_usd": s["suggestion"],
                "fork_cost_usd": s["fork"],
                "total_cost_usd": t.cost_usd + s["suggestion"] + s["fork"],
                "outcome": outcome(t),
                "suggestion_offered": t.suggestion_shown is not None or t.suggestion_at_submit is not None,
                "accepted": t.accepted,
                "miss_kind": t.miss_kind,
                "speculation_outcome": spec.outcome if spec is not None else None,
                "engine_time_saved_s": spec.time_saved_s if spec is not None else None,
                "fork_checked": t.fork_checked,
                "user_edit": t.user_edit,
                "error": t.error or None,
            }
        )
    return out


def write_csv(data: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=[c for c, _ in COLUMNS])
        w.writeheader()
        for r in data:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})


def write_parquet(data: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(
            "--format parquet needs pyarrow: pip install -e '.[export]' (or use --format csv)"
        ) from None
    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    schema = pa.schema([(c, types[t]) for c, t in COLUMNS])
    pq.write_table(pa.Table.from_pylist(data, schema=schema), path)


def export(run: Path, fmt: str, out: Path | None = None) -> Path:
    """Write the run's turns as ``fmt`` (default ``RUN/turns.FMT``); ValueError naming what is wrong."""
    from bench.report import load_run

    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r}: expected parquet or csv")
    if not run.is_dir():
        raise ValueError(f"{run}: not a results directory")
    records = load_run(run)
    if not records.turns:
        raise ValueError(f"{run}: no turns.jsonl (or turns.jsonl.gz) with records")
    summary_path = run / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    dest = out or run / f"turns.{fmt}"
    (write_parquet if fmt == "parquet" else write_csv)(rows(records, summary), dest)
    return dest


def export_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="speculate bench export",
        description="One row per turn of a run, as Parquet or CSV (columns: docs/experiments.md, Exports).",
    )
    ap.add_argument("run", type=Path, help="a results directory, or a kept headline directory")
    ap.add_argument("--format", default="parquet", help="parquet (needs pyarrow) or csv (default parquet)")
    ap.add_argument("--out", type=Path, default=None, help="output file (default RUN/turns.FORMAT)")
    a = ap.parse_args(argv)
    try:
        dest = export(a.run, a.format, a.out)
    except ValueError as e:
        print(f"speculate bench export: error: {e}", file=sys.stderr)
        return 2
    print(dest)
    return 0
