"""The figures that keep a report from overstating (issue #36, item 6), for one slice of a run:

- **what a condition varies, and whether it ever showed**: a top-K condition (K > 1) counts the turns that
  offered a second candidate, a λ condition the candidates the policy declined to fork; a condition that
  never showed what it varies says so ("K=2: 0 turns offered a second candidate") instead of standing as a
  result;
- **one suggestion, one record**: the suggestions the user saw are counted once each; the engine's records of
  a pipelined next suggestion thrown away with its fork (``discarded``, often empty: a request cut
  mid-stream) are costs of that fork, counted beside, never as suggestions;
- **acceptance as the user's choice**: the share of shown suggestions the user sent, with the policy's
  abstentions beside it (a suggestion the policy did not fork and the user sent anyway ran live: the user
  accepted it, the engine had nothing to accept);
- **slowdowns above a stated threshold** (:data:`SLOWER_THRESHOLD_S`), with the noise floor measured on the
  turns where the speculative arm had no speculation at all (their paired difference is timing noise).
"""

from __future__ import annotations

from typing import Any

from bench import stats
from bench.pairs import Records, paired_turns, user_saving
from bench.records import TurnRecord

SLOWER_THRESHOLD_S = 0.05  # a paired turn counts as slower above this (wall seconds); below it: noise
SHOWN = ("accepted", "ignored", "abstained")  # outcomes of a suggestion the user saw and decided on


def shown_suggestions(r: Records) -> dict[str, Any]:
    """Suggestions the user saw (one each), and the engine's other suggestion records counted beside."""
    sugg = r.suggestions()
    shown = [e for e in sugg if e.outcome in SHOWN]
    dead = [e for e in sugg if e.outcome == "discarded"]
    return {
        "shown": len(shown),
        "records": len(sugg),
        "not_shown": {
            "suppressed_or_filtered": sum(e.outcome in ("suppressed", "filtered") for e in sugg),
            # A fork's pipelined next suggestion, thrown away with the fork (its cost is the fork's waste).
            "discarded_with_fork": len(dead),
            "discarded_with_fork_cost_usd": sum(e.cost_usd for e in dead),
        },
    }


def user_acceptance(r: Records) -> dict[str, Any]:
    """The user's choice over shown suggestions, and the policy's abstentions beside it."""
    shown = [e for e in r.suggestions() if e.outcome in SHOWN]
    sent = [e for e in shown if e.chosen is not None or e.outcome == "accepted"]
    abstained = [e for e in shown if e.outcome == "abstained"]
    return {
        "shown": len(shown),
        "sent_by_user": len(sent),
        "user_acceptance": len(sent) / len(shown) if shown else None,
        "abstained": len(abstained),
        "abstained_then_sent": sum(e.chosen is not None for e in abstained),
        # The engine's acceptance: the user sent it and the fork's work landed (a fork stopped at a protected
        # path or a conflict ran its turn live although the user took the suggestion).
        "fork_landed": sum(t.accepted for t in r.arm_turns("speculative") if t.turn > 0),
    }


def _same_work(t: TurnRecord) -> bool:
    """The arm's turn typed its prompt and ran no fork: its paired base turn did the same work."""
    return t.speculation is None and t.input == "typed"


def slower(r: Records, base: str, arm: str = "speculative") -> dict[str, Any] | None:
    """Later turns of ``arm`` slower than their paired ``base`` turn by more than the threshold, and the
    noise floor: the paired differences on turns where ``arm`` ran no speculation (both did the same)."""
    pairs = [(b, a) for b, a in paired_turns(r.turns, base, arm) if a.turn > 0]
    if not pairs:
        return None
    diffs = [(a, user_saving(b, a)) for b, a in pairs]
    slow = [-x for _, x in diffs if x < -SLOWER_THRESHOLD_S]
    # Same work in both arms: the arm showed the same thing (or nothing) and ran no fork.
    same = [abs(x) for a, x in diffs if _same_work(a)]
    return {
        "threshold_s": SLOWER_THRESHOLD_S,
        "n": len(slow),
        "share": len(slow) / len(diffs),
        "max_s": max(slow) if slow else None,
        "within_threshold": sum(-SLOWER_THRESHOLD_S <= x < 0 for _, x in diffs),
        "above_noise_floor": sum(x > floor for x in slow) if (floor := _p95(same)) is not None else None,
        "noise_floor": {
            "n": len(same),
            "p95_abs_s": _p95(same),
            "max_abs_s": max(same) if same else None,
        },
    }


def _p95(xs: list[float]) -> float | None:
    return stats.percentile(xs, 95) if xs else None


def condition_shown(r: Records, params: dict[str, Any]) -> dict[str, Any] | None:
    """What this condition varies (top-K's K, the policy's λ) and how often it showed; None when it varies
    neither. ``note`` is set when it never showed."""
    sugg = [e for e in r.suggestions() if e.outcome in SHOWN]
    k = int(params.get("spec_k") or 1)
    lam = params.get("spec_value")
    if k > 1:
        n = sum(len(e.candidates) > 1 for e in sugg)
        what = f"K={k}"
        return {
            "varies": what,
            "turns": len(sugg),
            "shown": n,
            "note": f"{what}: 0 turns offered a second candidate" if n == 0 else None,
        }
    if lam is not None:
        n = sum(not d.fork for e in sugg for d in e.decisions)
        what = f"λ={lam:g}"
        return {
            "varies": what,
            "turns": len(sugg),
            "shown": n,
            "note": f"{what}: the policy declined no candidate (the same as always forking)"
            if n == 0
            else None,
        }
    return None


def figures(r: Records, params: dict[str, Any]) -> dict[str, Any]:
    """Every honest figure of one slice (summary.json's ``honest``)."""
    return {
        "suggestions": shown_suggestions(r),
        "acceptance": user_acceptance(r),
        "slower": {
            name: v
            for name, (base, arm) in {
                "suggest": ("suggest", "speculative"),
                "plain": ("plain", "speculative"),
                "suggest_vs_plain": ("plain", "suggest"),
            }.items()
            if (v := slower(r, base, arm)) is not None
        },
        "condition": condition_shown(r, params),
    }
