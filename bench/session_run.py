"""One session of one arm (a :class:`~bench.plan.Job`): the simulated user thinking, maybe editing a file,
typing the prompt or taking the suggestion; the canary around each turn; the fork of a wrong suggestion
checked; the turn and session records. Scheduling the sessions of a run is :mod:`bench.harness`'s job."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import trio

from bench.edits import maybe_edit
from bench.expect import check_turn, tally
from bench.forkcheck import ForkWatch, check_fork, miss_for, wrong_suggestion
from bench.plan import Job, RunConfig
from bench.records import SessionRecord, TurnRecord
from bench.toolchain import Toolchain
from bench.user import CYCLE_S, PlannedTurn, chosen_rank, plan_turns, recorded_thinks, typing_s
from bench.workspace import CACHE_DIRS, changed, manifest, prepare_workspace, tree_hash
from speculate.models.base import Model, Usage
from speculate.session import SessionConfig, TurnOutcome, open_session
from speculate.sim.draw import draw
from speculate.sim.script import FALLBACK_PREFIX
from speculate.speculation.approvals import ApproveFn, PendingApproval


async def _approve(tool: str, detail: str) -> Literal["y"]:
    return "y"  # the simulated user allows what the main agent asks for (edits are pre-allowed anyway)


async def _decline(pending: Sequence[PendingApproval]) -> Literal["n"]:
    return "n"


APPROVAL_POLICIES: dict[str, ApproveFn | None] = {"as-live": None, "decline": _decline}  # None: ask, as live


def _identity(job: Job) -> dict[str, Any]:
    """What names a session's records (its turns' and its own): the same keys, first, in both."""
    return {
        "session": job.session_id,
        "pair": job.pair,
        "arm": job.arm,
        "scenario": job.scenario.name,
        "rep": job.rep,
        "seed": job.seed,
        "cond": job.cond_index,
        "condition": job.condition.label,
    }


def _usage_cost(model_name: str, usage: Usage) -> float:
    from speculate.models.profiles import find_profile

    p = find_profile(model_name)
    return p.cost_usd(usage.as_dict()) if p else 0.0


def turn_record(
    job: Job,
    p: PlannedTurn,
    o: TurnOutcome,
    *,
    think_s: float,
    input_s: float,
    tab: bool,
    shown: str | None,
    at_submit: str | None,
    leak: list[str],
    miss_kind: str | None = None,
    unmet: list[str] | None = None,
) -> dict[str, Any]:
    usage = o.result.usage if o.result is not None else Usage()
    responses = o.result.responses if o.result is not None else []
    return {
        **_identity(job),
        "think_model": job.condition.think.label,
        "accept_prob": job.condition.accept_prob,
        "model_name": job.condition.model_name,
        "turn": p.index,
        "prompt": o.prompt,
        "think_s": think_s,
        "input_s": input_s,
        "miss_kind": miss_kind,
        "input": "tab" if tab else "typed",
        "suggestion_scripted": p.scripted_suggestion,
        "suggestion_shown": shown,
        "suggestion_matched": shown is not None and shown == p.text,
        "suggestion_at_submit": at_submit,
        "accepted": o.accepted if job.arm == "speculative" else tab,
        "latency_s": o.latency_s,
        # An unmet tool-result expectation is a turn error: the scripted answer no longer fits the tools.
        "error": o.error or ("; ".join(f"unmet expectation: {u}" for u in unmet) if unmet else ""),
        "unmet_expectations": unmet or [],
        "note": o.note,
        "fallback": o.text.startswith(FALLBACK_PREFIX),  # the simulator had no scripted answer
        "stop": o.result.stop if o.result is not None else "speculated",
        "ttft_s": responses[0].ttft_s if responses else None,
        "requests": len(responses),
        "tokens": usage.as_dict(),
        "cost_usd": _usage_cost(job.condition.model_name, usage),
        "speculation": o.speculation.model_dump() if o.speculation is not None else None,
        "leak": leak,
    }


async def run_session(
    job: Job, model: Model, cfg: RunConfig, tmp_root: Path, toolchain: Toolchain
) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """One session: returns (turn records, session record, event records). Every command it runs (both
    loops, sandboxed or not) gets ``toolchain``'s PATH."""
    work = Path(tempfile.mkdtemp(prefix="s-", dir=tmp_root))
    scale = cfg.time_scale
    try:
        project = prepare_workspace(job.scenario, work / "project")
        # The candidate the simulator offers after each turn for this seed (the same draw as the server's),
        # and under a forced hit rate the kind of miss it is.
        offers = [
            draw(job.scenario, i, seed=job.seed, hit_rate=job.condition.accept_prob)
            for i in range(len(job.scenario.turns))
        ]
        plan = plan_turns(
            [t.prompt for t in job.scenario.turns],
            [c.text for c, _ in offers],
            think=job.condition.think,
            seed=job.seed,
            scenario=job.scenario.name,
            rep=job.rep,
            recorded=recorded_thinks(job.scenario),
        )
        spec = job.arm != "plain"  # suggestions shown (both suggest and speculative)
        watch = ForkWatch(model)  # a wrong suggestion's fork: its tool results are checked too
        sc = SessionConfig(
            project=project,
            model=watch,
            model_name=job.condition.model_name,
            mode=cfg.mode,
            speculate=spec,
            fork=job.arm == "speculative",
            overlay_backend=cfg.overlay_backend,
            spill_dir=work / "spill",
            user_dir=work / "claude",  # not the runner's ~/.claude
            trusted=True,  # a workspace the bench generated: its own (run.json says so), not recorded
            tool_env=toolchain.env,
            spec_value=job.condition.spec_value,
            spec_candidates=job.condition.spec_k,
            spec_edits=job.condition.spec_edits,
            spec_history=cfg.spec_history,
        )
        (work / "spill").mkdir()
        turns: list[dict[str, Any]] = []
        leaks: list[dict[str, Any]] = []
        last = manifest(project)
        async with open_session(sc, ask=_approve, approve=APPROVAL_POLICIES[cfg.approval]) as s:
            t0 = time.perf_counter()
            for p in plan:
                think_s = p.think_s * scale
                await trio.sleep(think_s / 2)
                edited = None
                if p.index > 0:  # halfway through thinking, while a fork may be running
                    edited = maybe_edit(
                        project,
                        job.scenario.turns[p.index].steps,
                        prob=cfg.user_edit_prob,
                        seed=job.seed,
                        scenario=job.scenario.name,
                        rep=job.rep,
                        turn=p.index,
                    )
                await trio.sleep(think_s / 2)
                shown = s.suggestion if spec else None
                cands = s.suggestions if spec else []
                # Top-K: the ghost text is the first candidate; each further one is a key press away. The user
                # takes the first their decision rule accepts (bench/user.py), and sends it as shown.
                prev = job.scenario.turns[p.index - 1].options if p.index > 0 else ()
                rank = chosen_rank(cfg.accept_rule, cands, job.scenario.turns[p.index], prev)
                tab = rank is not None
                cond = job.condition
                input_s = (
                    cond.tab_s + CYCLE_S * (rank or 0) if tab else typing_s(p.text, cond.typing_cps)
                ) * scale
                await trio.sleep(input_s)
                # Canary: only the speculation (and the user's own edit) ran since the last turn ended.
                now = manifest(project)
                leak = [x for x in changed(last, now) if x != edited]
                if leak:
                    leaks.append({"turn": p.index, "when": "before submit", "paths": leak})
                at_submit = s.suggestion if spec else None
                n_msgs = len(s.messages)
                o = await s.submit(cands[rank] if rank is not None else p.text)
                last = manifest(project)
                unmet = check_turn(job.scenario.turns[p.index].steps, s.messages[n_msgs:])
                checked = 0
                if (
                    p.index > 0
                    and job.arm == "speculative"
                    and (miss := miss_for(job.scenario, offers, p.index))
                ):
                    fork_unmet, checked = check_fork(miss, watch.seen)
                    unmet += fork_unmet
                watch.watch(wrong_suggestion(job.scenario, offers, p.index))  # the next fork, if it is a miss
                turns.append(
                    turn_record(
                        job,
                        p,
                        o,
                        think_s=think_s,
                        input_s=input_s,
                        tab=tab,
                        shown=shown,
                        at_submit=at_submit,
                        leak=leak,
                        unmet=unmet,
                        miss_kind=offers[p.index - 1][1] if p.index > 0 else None,
                    )
                )
                turns[-1]["user_edit"] = edited
                turns[-1]["candidates_shown"] = cands if len(cands) > 1 else None
                turns[-1]["candidate_rank"] = rank
                turns[-1]["fork_checked"] = checked
                turns[-1]["expect_tally"] = tally(job.scenario.turns[p.index].steps, s.messages[n_msgs:])
                TurnRecord.model_validate(turns[-1])  # the schema the report reads back
            wall = time.perf_counter() - t0
            events = [{"session": job.session_id, "arm": job.arm, **r.model_dump()} for r in s.events.records]
            stats = s.statistics()
        final = manifest(project)
        if changed(last, final):  # the session closed: a leftover speculation must have been discarded
            leaks.append({"turn": len(plan), "when": "after close", "paths": changed(last, final)})
        sess = {
            **_identity(job),
            "wall_s": wall,
            "turns": len(turns),
            "accepted": sum(t["accepted"] for t in turns),
            "errors": sum(bool(t["error"]) for t in turns),
            "leaks": leaks,
            "final_tree": tree_hash({k: v for k, v in final.items() if not (set(k.split("/")) & CACHE_DIRS)}),
            "cost_usd": sum(t["cost_usd"] for t in turns) + sum(e.get("cost_usd", 0.0) for e in events),
            "statistics": stats,
        }
        SessionRecord.model_validate(sess)
        return turns, sess, events
    finally:
        shutil.rmtree(work, ignore_errors=True)
