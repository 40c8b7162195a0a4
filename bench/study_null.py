"""A simulated study with a known null effect, written as study records without running a model: each
person's think time (from when the prompt opened to the first key), typing and answer latency are drawn
from their own habits and never from the arm, so every arm difference the report finds is chance. The arms
come from :class:`speculate.study.arms.Assigner` (blocked within each session), as the REPL draws them.

What the arm does change, as in the REPL, is when the ghost text appears: at once after a turn whose fork
was taken (the pipelined suggestion is ready), after a suggestion request otherwise. A think time measured
from the ghost text (the records' ``think_s``) therefore depends on the previous turn's arm, which blocked
randomization correlates with the current one; think time from when the prompt opened does not.

    python -m bench.study_null --out results/study-null --people 6 --sessions 3 --turns 24
    speculate study report results/study-null/*
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from speculate.study.arms import DEFAULT_ARMS, Arm, Assigner
from speculate.study.records import Assignment, SessionEnd, SessionStart, TurnRecord

TAKE = 0.6  # every simulated person takes a shown suggestion this often, in every arm
TAB_S = 0.2


def _person(rng: random.Random) -> tuple[float, float, float]:
    """(think median s, typing s, answer latency median s): one person's habits."""
    return rng.uniform(3.0, 8.0), rng.uniform(2.0, 6.0), rng.uniform(4.0, 9.0)


def write_session(
    study_dir: Path,
    *,
    user: str,
    index: int,
    seed: int,
    turns: int,
    arms: Sequence[Arm],
    habits: tuple[float, float, float],
) -> Path:
    """One session file of ``turns`` turns; returns its path."""
    rng = random.Random(f"null:{seed}:{user}:{index}")
    think_median, typing, latency_median = habits
    sid = f"{user}-{index}"
    assign = Assigner(seed=seed, arms=arms)
    t0 = 1_800_000_000.0 + 10_000 * index
    recs: list[str] = [
        SessionStart(
            session=sid,
            user=user,
            seed=seed,
            arms=list(arms),
            started=t0,
            model="sim",
            model_name="claude-sonnet-4-6",
            frontend="api",
            edit_similarity={},
        ).model_dump_json()
    ]
    prev_arm: str | None = None
    prev_taken = False
    now = t0
    for n in range(1, turns + 1):
        arm = assign.draw()
        recs.append(
            Assignment(
                session=sid, turn=n, arm=arm, seed=seed, draw=assign.draws, after_turn=n - 1, at=now
            ).model_dump_json()
        )
        think = min(60.0, 2.0 + rng.lognormvariate(math.log(think_median), 0.8))
        # The ghost text: ready at once after a taken fork, else after the suggestion request, always before
        # the person looks up (2 s at least), so that what they do never depends on when it came.
        shown = 0.0 if prev_arm == "speculative" and prev_taken else rng.uniform(0.5, 2.0)
        has_ghost = arm != "plain"
        took = has_ghost and rng.random() < TAKE
        typed = TAB_S if took else typing * rng.uniform(0.7, 1.3)
        latency = rng.lognormvariate(
            math.log(latency_median), 0.4
        )  # the null effect: the arm changes nothing
        eligible = n > 1
        recs.append(
            TurnRecord(
                session=sid,
                turn=n,
                conversation_turn=n,
                arm=arm,
                eligible=eligible,
                ready_at=now,
                suggestion="do the next thing" if has_ghost else None,
                suggestion_source="model" if has_ghost else None,
                shown_s=shown if has_ghost else None,
                first_key_s=think,
                took_ghost=took,
                ghost_taken_s=think if took else None,
                submit_s=think + typed,
                prompt="do the next thing" if took else "something of my own",
                taken="taken" if took else ("ignored" if has_ghost else "none"),
                think_s=think - shown
                if has_ghost
                else None,  # from the ghost text, as the recorder writes it
                typing_s=typed,
                ttft_s=latency / 3,
                latency_s=latency,
                accepted=took and arm == "speculative",
            ).model_dump_json()
        )
        prev_arm, prev_taken = arm, took
        now += think + typed + latency
    recs.append(SessionEnd(session=sid, turns=turns, ended=now).model_dump_json())
    path = study_dir / "sessions" / f"{index:04d}-{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(recs) + "\n", encoding="utf-8")
    return path


def write_study(
    out: Path, *, people: int, sessions: int, turns: int, seed: int, arms: Sequence[Arm] = DEFAULT_ARMS
) -> list[Path]:
    """``people`` study directories ``out/person-N``, each with ``sessions`` session files."""
    rng = random.Random(seed)
    files = []
    for p in range(1, people + 1):
        habits = _person(rng)
        for s in range(sessions):
            files.append(
                write_session(
                    out / f"person-{p}",
                    user=f"null-{p}",
                    index=s,
                    seed=seed * 1000 + p * 10 + s,
                    turns=turns,
                    arms=arms,
                    habits=habits,
                )
            )
    return files


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.study_null", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--people", type=int, default=6)
    p.add_argument("--sessions", type=int, default=3)
    p.add_argument("--turns", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if min(a.people, a.sessions, a.turns) < 1:
        p.error("--people, --sessions and --turns must be at least 1")
    files = write_study(a.out, people=a.people, sessions=a.sessions, turns=a.turns, seed=a.seed)
    print(f"{len(files)} session files under {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
