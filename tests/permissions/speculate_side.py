"""One configuration under speculate's live loop: a session with speculation off on the scripted turn,
against the embedded simulator, in a child process whose HOME is the configuration's scratch HOME (so
``~``, ``~/.claude.json`` and the user's settings are the scratch ones, as for Claude Code).

The session's ``ask`` records the question and answers "n", as nobody answers under ``claude -p``. A call
is then: ran = allow; refused after a question = ask; refused without one (the gate's deny, a hook's deny)
= deny; refused as invalid input = ``error``.

``python -m tests.permissions.speculate_side SPEC.json...`` is the child: each SPEC names a project, its
HOME, the mode and the scenario; it writes the calls it saw next to SPEC (``speculate.json``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .cases import Config
from .claude_side import Outcome, SideRun, result_text, served_differently
from .layout import changes, make, scenario, snapshot

TIME_SCALE = 0.01
REPO = Path(__file__).resolve().parents[2]
TOOL_ERRORS = ("No such tool", "Invalid input", "validation error")


def classify(call: dict[str, Any]) -> str:
    if not call["denied"]:
        # The file tools' own jail ("Refused: … resolves outside the project root"): nothing was read or
        # written and nobody was asked, a refusal like a deny.
        return "deny" if call["is_error"] and call["result"].startswith("Refused:") else "allow"
    if call["asked"]:
        return "ask"
    if any(e in call["result"] for e in TOOL_ERRORS):
        return "error"
    return "deny"


def run(cfg: Config, base: Path, tree: Path | None = None) -> SideRun:
    """One configuration (:func:`run_batch` of one)."""
    return run_batch([(cfg, base)], tree)[0]


def run_batch(items: list[tuple[Config, Path]], tree: Path | None = None) -> list[SideRun]:
    """Configurations one after the other in one child (importing speculate and the SDK takes longer than
    a configuration's calls), each in its own directory with its own HOME. ``tree``: a checkout whose
    ``speculate`` package the child imports (default: this one)."""
    befores, specs = [], []
    for cfg, base in items:
        make(cfg, base)
        (base / "run").mkdir()
        befores.append(snapshot(base))
        spec = base / "run" / "spec.json"
        spec.write_text(json.dumps({"project": str(base / "proj"), "home": str(base / "home"), "mode": cfg.mode,
                                    "calls": len(cfg.calls), "scenario": scenario(cfg, base)}))  # fmt: skip
        specs.append(str(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "PYTEST_"))}
    python_bin = str(Path(sys.executable).parent)  # as ClaudeCode.env: `python` is the checkout's
    # The tree's speculate first (PYTHONPATH comes before the editable install's finder); this checkout's
    # tests next (``tests`` is a namespace package, so tests.permissions is found here).
    path = os.pathsep.join(str(p) for p in (tree, REPO) if p is not None)
    env.update(PATH=f"{python_bin}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=path)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.permissions.speculate_side", *specs],
        cwd=tree or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    wall = (time.perf_counter() - t0) / len(items)
    crashed = [] if proc.returncode == 0 else [f"speculate exited {proc.returncode}: {proc.stderr[-600:]}"]
    return [
        _read(cfg, base, before, crashed, wall) for (cfg, base), before in zip(items, befores, strict=True)
    ]


def _read(cfg: Config, base: Path, before: dict[str, str], notes: list[str], wall: float) -> SideRun:
    out_path = base / "run" / "speculate.json"
    empty: dict[str, Any] = {"calls": [], "notes": list(notes)}
    seen: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else empty
    outs = []
    for i, call in enumerate(cfg.calls):
        if i >= len(seen["calls"]):
            outs.append(Outcome("missing", "the agent never got this call"))
            continue
        got = seen["calls"][i]
        served = served_differently(call, base, got["name"], got["input"])
        text = "; ".join([*(f"asked: {q}" for q in got["asked"]), got["result"]])
        outs.append(Outcome(classify(got), text[:600], served))
    return SideRun(outs, changes(before, snapshot(base)), seen["notes"], wall)


def session_mode(mode: str | None) -> dict[str, Any]:
    """SessionConfig's mode arguments for a configuration's mode. None (no --permission-mode): the
    settings' defaultMode, else ``default``, as Claude Code does: ``settings_mode=True`` where the tree's
    SessionConfig has it; a tree without it ignores defaultMode, and runs in its own default mode."""
    from dataclasses import fields

    from speculate.session import SessionConfig

    has = "settings_mode" in {f.name for f in fields(SessionConfig)}
    if mode is None:
        return {"mode": "default", "settings_mode": True} if has else {}
    return {"mode": mode}


async def _session(spec: dict[str, Any], out: Path) -> None:
    from speculate.agent_types import ToolFinished
    from speculate.models.anthropic import AnthropicModel
    from speculate.session import SessionConfig, open_session
    from speculate.sim import SimServer
    from speculate.sim.scenario_yaml import parse_scenario

    project = Path(spec["project"])
    pending: list[str] = []
    finished: dict[str, dict[str, Any]] = {}
    notes: list[str] = []

    async def ask(tool: str, summary: str) -> Any:
        pending.append(f"{tool}: {summary}")
        return "n"

    def on_event(e: Any) -> None:
        if isinstance(e, ToolFinished):
            finished[e.id] = {
                "denied": e.denied,
                "is_error": e.is_error,
                "result": e.result,
                "asked": list(pending),
            }
            pending.clear()

    calls: list[dict[str, Any]] = []
    with SimServer([parse_scenario(spec["scenario"])], seed=0, time_scale=TIME_SCALE) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="sim", backoff_s=0.01) as model:
            kw = session_mode(spec["mode"])
            cfg = SessionConfig(
                project=project,
                model=model,
                speculate=False,
                mcp=False,
                hook_transcript_dir=out.parent / "transcripts",
                max_turns=spec["calls"] + 10,  # a configuration is one turn of one call per step
                **kw,
            )
            try:
                async with open_session(cfg, ask=ask, on_event=on_event) as s:
                    outcome = await s.submit("go")
                    if outcome.error:
                        notes.append(f"turn error: {outcome.error}")
                    for m in s.messages:
                        if m["role"] != "assistant":
                            continue
                        for b in m["content"]:
                            if b.get("type") == "tool_use":
                                calls.append({"id": b["id"], "name": b["name"], "input": b["input"]})
            except Exception as e:  # the session did not open (a setting it refuses): said, not hidden
                notes.append(f"session failed: {type(e).__name__}: {e}")
        if sim.statistics().engine.fallbacks:
            notes.append(f"simulator fallbacks: {sim.statistics().engine.fallbacks}")
    for c in calls:
        f = finished.get(c["id"], {"denied": True, "is_error": True, "result": "no result", "asked": []})
        c.update(f, result=result_text(f["result"]))
    out.write_text(json.dumps({"calls": calls, "notes": notes}))


def main(specs: list[str]) -> None:
    import trio

    for name in specs:
        spec_path = Path(name)
        spec = json.loads(spec_path.read_text())
        os.environ["HOME"] = spec["home"]  # read where it is used (Path.home()), not at import
        out = spec_path.parent / "speculate.json"
        try:
            trio.run(_session, spec, out)
        except BaseException as e:  # one configuration's crash is its note, not the end of the batch
            out.write_text(json.dumps({"calls": [], "notes": [f"crashed: {type(e).__name__}: {e}"]}))


if __name__ == "__main__":
    main(sys.argv[1:])
