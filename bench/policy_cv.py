"""The speculation policy evaluated out of sample (issue #36, item 4): leave-one-scenario-out
cross-validation of the λ frontier on the records of an always-forking run.

    python -m bench.policy_cv RUN_DIR [--value 0.003,0.01,0.03] [--scenario NAME ...] [--json OUT]

For each acceptance condition of the run, each scenario is held out in turn: the policy's history (its
P(accept) and P(lands | accept) counts and its saving estimate, :mod:`bench.policy_history`) is fitted on the
*other* scenarios' speculative sessions, and the held-out scenario's sessions are replayed suggestion by
suggestion under λ: the policy decides from the recorded features (and its fork-cost estimate as recorded),
then learns from what the user did, as the engine would. Two more fits show what cross-validation guards
against: ``cold`` (no history, the stated priors) and ``in-sample`` (the history fitted on every scenario,
the held-out one included, as the earlier frontier's priors were).

The replay is counterfactual and exact for the logging policy: the run forked every suggestion, so a
suggestion the policy forks has the recorded outcome (its turn's paired saving against the suggest arm, and
its cost), and one it declines runs as the suggest arm's paired turn did (saving 0 against suggest, the
suggest arm's cost for that turn and its suggestion). At λ = ∞ the figures are the run's own. What it
cannot model: a fork's cost when fewer forks were observed (the recorded estimate is used), and the
pipelined suggestion an abstention would not have had.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import stats
from bench.pairs import Records, estimate, nested, user_saving
from bench.policy_history import history
from bench.records import TurnRecord, dicts
from bench.report import load_run
from speculate.speculation.events import Decision
from speculate.speculation.policy import SpecPolicy, _features

# cv: P(lands) with leave-one-scenario-out priors; cv-accept: the same priors, P(accept) alone (the policy
# before issue #36); cold: no history; in-sample: the history of every scenario, the held-out one included.
FITS = ("cv", "cv-accept", "cold", "in-sample")
DEFAULT_VALUES = (0.003, 0.01, 0.03)


@dataclass
class Outcome:
    """One held-out later turn under the policy."""

    turn: TurnRecord  # the speculative arm's (for the scenario/rep clustering)
    saving_s: float
    forked: bool
    shown: bool  # a suggestion with a decision was shown before it
    sent: bool  # the user sent the (first) candidate
    landed: bool  # forked, sent and its work used
    would_land: bool  # the logged fork was used (whatever the policy did)


def _cycle_cost(r: Records, session: str, turn: int, arm: str) -> float:
    """What the suggestion (and, in the speculative arm, the fork) made before ``turn`` cost."""
    return sum(e.cost_usd for e in r.events if e.session == session and e.arm == arm and e.turn == turn)


def replay_session(
    r: Records,
    spec: list[TurnRecord],
    base: list[TurnRecord],
    state: dict[str, Any] | None,
    value: float | None,
    *,
    use_land: bool = True,
) -> tuple[list[Outcome], float, float]:
    """One speculative session replayed under λ = ``value`` from ``state``: its later turns' outcomes, and
    the session's counterfactual cost and its suggest-arm cost."""
    pol = SpecPolicy(value=value, use_land=use_land)
    if state:
        pol.load_state(state)
    sid, bid = spec[0].session, base[0].session
    sugg = {
        e.turn: e
        for e in r.suggestions()
        if e.session == sid and e.decisions and e.outcome in ("accepted", "ignored", "abstained")
    }
    by_turn = {t.turn: t for t in base}
    cost_spec = sum(s.cost_usd for s in r.sessions if s.session == sid)
    cost_base = sum(s.cost_usd for s in r.sessions if s.session == bid)
    out: list[Outcome] = []
    last = max(t.turn for t in spec)
    for n in range(1, last + 2):  # the last cycle (after the last prompt) has no turn but costs all the same
        t, b = next((x for x in spec if x.turn == n), None), by_turn.get(n)
        e = sugg.get(n)
        if e is None:
            if t is not None and b is not None:
                out.append(Outcome(t, user_saving(b, t), False, False, False, False, t.accepted))
            continue
        d0 = e.decisions[0]
        d = pol.decision(_features(d0), d0.text, saving_s=pol.saving.value, cost_usd=d0.expected_cost_usd)
        sent = e.chosen == 0
        if not d.fork:  # this turn (and its cycle) as the suggest arm had it
            spent = (t.cost_usd if t else 0.0) + _cycle_cost(r, sid, n, "speculative")
            kept = (b.cost_usd if b else 0.0) + _cycle_cost(r, bid, n, "suggest")
            cost_spec += kept - spent
        pol.observe_choice(
            [Decision.model_validate(d.model_dump())],
            e.chosen,
            time_to_decision_s=e.time_to_decision_s or 0.0,
        )
        if t is None or b is None:
            continue
        used = d.fork and t.accepted and t.speculation is not None
        pol.observe_turn(
            latency_s=t.latency_s if d.fork else b.latency_s,
            time_saved_s=t.speculation.time_saved_s if used and t.speculation else None,
        )
        out.append(
            Outcome(t, user_saving(b, t) if d.fork else 0.0, d.fork, True, sent, bool(used), t.accepted)
        )
    return out, cost_spec, cost_base


def _sessions(
    r: Records, cond: int, scenarios: set[str] | None
) -> dict[str, tuple[list[TurnRecord], list[TurnRecord]]]:
    """Pair -> (speculative turns, suggest turns) of an always-forking K = 1 condition."""
    by: dict[str, dict[str, list[TurnRecord]]] = defaultdict(lambda: defaultdict(list))
    for t in r.turns:
        if t.cond == cond and (scenarios is None or t.scenario in scenarios):
            by[t.pair][t.arm].append(t)
    return {
        p: (sorted(a["speculative"], key=lambda t: t.turn), sorted(a["suggest"], key=lambda t: t.turn))
        for p, a in sorted(by.items())
        if a.get("speculative") and a.get("suggest")
    }


def evaluate(
    run: Path,
    *,
    values: Sequence[float | None] = DEFAULT_VALUES,
    scenarios: Sequence[str] | None = None,
    fits: Sequence[str] = FITS,
    seed: int = 0,
    train: Path | None = None,
) -> list[dict[str, Any]]:
    """One row per (condition, fit, λ): the held-out figures (module docstring). ``train``: fit the
    histories on that run's first condition instead (a user whose history comes from another regime, e.g.
    natural acceptance, evaluated where every suggestion misses); the held-out scenario is left out of it
    all the same."""
    r = load_run(run)
    tr = load_run(train) if train is not None else None
    tr_prob = (
        (json.loads((train / "summary.json").read_text(encoding="utf-8")).get("condition_params") or [{}])[
            0
        ].get("accept_prob")
        if train is not None
        else None
    )
    meta = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    params = meta.get("condition_params") or [{}]
    keep = set(scenarios) if scenarios else None
    rows = []
    for ci, prm in enumerate(params):  # ci: the condition's index (turn records' cond)
        if prm.get("spec_value") is not None or int(prm.get("spec_k") or 1) != 1:
            continue  # only an always-forking run logs every fork's outcome
        prob = prm.get("accept_prob")
        pairs = _sessions(r, ci, keep)
        names = sorted({spec[0].scenario for spec, _ in pairs.values()})
        if len(names) < 2:
            continue
        states: dict[tuple[str, str], dict[str, Any] | None] = {}
        src, src_prob, src_cond = (run, prob, ci) if tr is None or train is None else (train, tr_prob, 0)
        read = (dicts(r.turns), dicts(r.events)) if tr is None else (dicts(tr.turns), dicts(tr.events))
        full = history(src, src_prob, scenarios=keep, records=read, cond=src_cond)
        for name in names:
            states[("cv", name)] = history(
                src, src_prob, exclude=(name,), scenarios=keep, records=read, cond=src_cond
            )
            states[("cv-accept", name)] = states[("cv", name)]
            states[("cold", name)] = None
            states[("in-sample", name)] = full
        for fit, value in [(fits[0], None), *((fit, v) for fit in fits for v in values)]:
            outs: list[Outcome] = []
            cost = base = 0.0
            for spec, sug in pairs.values():
                state = states[(fit, spec[0].scenario)]
                o, c, b = replay_session(r, spec, sug, state, value, use_land=fit != "cv-accept")
                outs += o
                cost, base = cost + c, base + b
            rows.append(_row(run.name, prob, fit, value, outs, cost, base, seed))
    return rows


def _row(
    run: str,
    prob: float | None,
    fit: str,
    value: float | None,
    outs: list[Outcome],
    cost: float,
    base: float,
    seed: int,
) -> dict[str, Any]:
    groups = nested((o.turn, o.saving_s) for o in outs)
    saving = estimate(groups, stats.mean, "mean", seed=seed)
    shown = [o for o in outs if o.shown]
    declined = [o for o in shown if not o.forked]
    return {
        "run": run,
        "accept_prob": prob,
        "fit": "—" if value is None else fit,
        "spec_value": value,
        "saving_s": saving["mean"],
        "saving_ci95": saving["ci95"],
        "cost_over_suggest": cost / base - 1 if base else None,
        "suggestions": len(shown),
        "forked": len(shown) - len(declined),
        "declined": len(declined),
        "declined_then_sent": sum(o.sent for o in declined),
        "declined_would_land": sum(o.would_land for o in declined),
        "forked_not_sent": sum(o.forked and not o.sent for o in shown),
        "forked_sent_not_landed": sum(o.forked and o.sent and not o.landed for o in shown),
    }


def table(rows: list[dict[str, Any]]) -> str:
    def f(x: Any, spec: str) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    lines = [
        "| acceptance | λ ($/s) | priors | saving/later turn vs suggest [CI] (s) | cost over suggest | forked / shown | "
        "declined: sent by the user / would have landed | forked, not sent | forked and sent, did not land |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = r["saving_ci95"]
        lines.append(
            f"| {'natural' if r['accept_prob'] is None else format(r['accept_prob'], 'g')} | "
            f"{'always' if r['spec_value'] is None else format(r['spec_value'], 'g')} | {r['fit']} | "
            f"{f(r['saving_s'], '.2f')} {'[' + ', '.join(f'{c:.2f}' for c in ci) + ']' if ci else ''} | "
            f"{f(r['cost_over_suggest'], '+.0%')} | {r['forked']}/{r['suggestions']} | "
            f"{r['declined']}: {r['declined_then_sent']} / {r['declined_would_land']} | {r['forked_not_sent']} | "
            f"{r['forked_sent_not_landed']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.policy_cv", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run directory (or a kept headline) of an always-forking run")
    ap.add_argument(
        "--value", default=",".join(f"{v:g}" for v in DEFAULT_VALUES), help="λ values, comma-separated"
    )
    ap.add_argument("--scenario", nargs="+", default=None, help="only these scenarios (a subset)")
    ap.add_argument("--fits", default=",".join(FITS), help=f"which priors: {', '.join(FITS)}")
    ap.add_argument(
        "--train",
        type=Path,
        default=None,
        metavar="RUN_DIR",
        help="fit the histories on this run's first condition (another regime), the held-out scenario left out",
    )
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    try:
        values = [float(v) for v in a.value.split(",") if v.strip()]
        fits = [x for x in a.fits.split(",") if x]
        if bad := [x for x in fits if x not in FITS]:
            raise ValueError(f"--fits: unknown {bad[0]!r}; choose from {', '.join(FITS)}")
        rows = evaluate(a.run, values=values, scenarios=a.scenario, fits=fits, train=a.train)
    except (OSError, ValueError, KeyError) as e:
        print(f"bench.policy_cv: error: {a.run}: {e}", file=sys.stderr)
        return 2
    if not rows:
        print(
            f"bench.policy_cv: error: {a.run}: no always-forking condition with two scenarios or more",
            file=sys.stderr,
        )
        return 2
    print(table(rows))
    if a.json is not None:
        a.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
