"""A speculation-policy history from an earlier run, for ``speculate bench --spec-history FILE``.

    python -m bench.policy_history RUN_DIR --accept-prob natural|P --out FILE

replays the speculative arm's suggestion records of one acceptance condition (every candidate's features
and whether the user sent it) and its turns (what a right fork saved or would have) into the policy's
state, as ``speculation.persist`` would have kept it on a project used that way: a returning user's
history. That includes P(lands | accept): a taken fork whose work was not used (it stopped at a protected
path, or conflicted) counts as one that did not land. Use a run with another ``--seed`` than the run that starts from it, so no draw is shared.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from bench.records import TurnRecord, dicts, load_events, load_records
from speculate.models.base import Usage
from speculate.speculation.events import Decision
from speculate.speculation.policy import SpecPolicy


def history(
    run: Path,
    accept_prob: float | None,
    *,
    exclude: Sequence[str] = (),
    scenarios: Collection[str] | None = None,
    records: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None,
    cond: int | None = None,
) -> dict[str, Any]:
    """The policy state the run's speculative sessions of one condition teach, leaving out the scenarios in
    ``exclude`` (leave-one-scenario-out: bench/policy_cv.py) and keeping only ``scenarios`` when given.
    ``records``: the run's (turns, events) as dicts, already read; ``cond``: only that condition's sessions."""
    all_turns, events = records or (
        dicts(load_records(run / "turns.jsonl", TurnRecord)),
        dicts(load_events(run / "events.jsonl")),
    )
    turns = [
        t
        for t in all_turns
        if t["arm"] == "speculative"
        and t["accept_prob"] == accept_prob
        and t["scenario"] not in exclude
        and (cond is None or t["cond"] == cond)
        and (scenarios is None or t["scenario"] in scenarios)
    ]
    if not turns:
        raise ValueError(f"{run}: no speculative turns with accept_prob {accept_prob}")
    sessions = {t["session"] for t in turns}
    sugg: dict[tuple[str, int], dict[str, Any]] = {}
    for e in events:
        if e["session"] in sessions and e["kind"] == "suggestion" and e["decisions"]:
            sugg[(e["session"], e["turn"])] = e
    pol = SpecPolicy()
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        by_session[t["session"]].append(t)
    for sid in sorted(by_session):
        for t in sorted(by_session[sid], key=lambda t: t["turn"]):
            # The engine's record `turn` N is the suggestion shown after the N-th prompt: decided at this one.
            shown = sugg.get((sid, t["turn"]))
            if shown is not None:
                pol.observe_choice(
                    [Decision.model_validate(d) for d in shown["decisions"]],
                    shown["chosen"],
                    time_to_decision_s=shown["time_to_decision_s"] or 0.0,
                )
            # A used fork's saving; a taken fork not used (a protected path, a conflict) did not land.
            spec = t["speculation"] if t["accepted"] else None
            pol.observe_turn(latency_s=t["latency_s"], time_saved_s=spec["time_saved_s"] if spec else None)
    for e in events:  # what whole forks cost (runs before `requests` was kept: none)
        if e["session"] in sessions and e["kind"] == "speculation" and e["completed"] and e["requests"]:
            pol.cost.observe(e["requests"], Usage(**{k: int(v) for k, v in e["tokens"].items()}))
    return pol.state()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.policy_history", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--accept-prob", default="natural", help="the condition to learn from: natural or a rate")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        prob = None if a.accept_prob == "natural" else float(a.accept_prob)
        state = history(a.run, prob)
    except ValueError as e:
        print(f"bench.policy_history: error: {e}", file=sys.stderr)
        return 2
    a.out.write_text(json.dumps(state), encoding="utf-8")
    print(f"{a.out}: {sum(sum(c) for k, c in state['counts'].items() if k.count('|') == 0)} outcomes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
