"""``speculate repl``: take the options (:mod:`speculate.repl.options`), set up the project (the simulator
demo's, or a given directory), open the model and the session, and run the REPL on the terminal (or in
line mode when piped). What it prints itself (notes, paths, errors) is made :func:`speculate.term.visible`,
as the REPL's output is."""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from overlayfs import ProjectLocked, PromoteError, recover_project
from speculate.repl.controller import Repl
from speculate.repl.options import add_options, build_parser
from speculate.repl.resume import new_path, requested, restore
from speculate.repl.startperms import Permissions, _permissions, ask_trust  # noqa: F401  (re-exported)
from speculate.tempfiles import clean_stale, temp_dir
from speculate.term import visible

if TYPE_CHECKING:
    from speculate.speculation.approvals import ApproveFn

# Engine records a REPL session keeps in memory (the events file, with --events, keeps every one; /stats
# counts every one): a session of hundreds of turns keeps its memory flat.
KEEP_RECORDS = 50


def configure(p: argparse.ArgumentParser) -> None:
    """The options of ``speculate repl`` (on the command tree of :mod:`speculate.cli`)."""
    add_options(p)
    p.set_defaults(run=run_args)


def history_path() -> Path:
    """$SPECULATE_HISTORY, else $XDG_STATE_HOME/speculate/history, else ~/.speculate_history."""
    if os.environ.get("SPECULATE_HISTORY"):
        return Path(os.environ["SPECULATE_HISTORY"])
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]) / "speculate" / "history"
    return Path.home() / ".speculate_history"


def run_main(argv: Sequence[str] | None = None) -> int:
    from speculate.cliparse import UsageError

    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        return e.status
    return run_args(args)


def run_args(args: argparse.Namespace) -> int:
    from speculate.repl.demo import DemoError
    from speculate.repl.study import prepare

    for name in ("time_scale", "connect_timeout", "read_timeout"):
        if not getattr(args, name) > 0:
            print(
                f"speculate repl: --{name.replace('_', '-')} must be > 0, not {getattr(args, name)}",
                file=sys.stderr,
            )
            return 2
    try:
        if not prepare(args):  # a study: its consent first, before anything starts
            return 1
        return trio.run(_run, args)
    except (DemoError, ValueError, FileNotFoundError, NotADirectoryError) as e:
        print(visible(f"speculate repl: {e}"), file=sys.stderr)
        return 2
    except (PromoteError, ProjectLocked) as e:  # start-up recovery could not finish
        print(visible(f"speculate repl: {e}"), file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace) -> int:
    # First: from here on SIGHUP (the terminal closed) and SIGTERM end the REPL through its normal exit
    # path, so the temporary project, spill directory and overlays are removed.
    with trio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM) as signals:
        return await _run_repl(args, signals)


async def _run_repl(args: argparse.Namespace, signals: Any) -> int:
    from speculate.backends import BackendConfig, is_simulator, open_model
    from speculate.repl.demo import DEFAULT_SCENARIO, Demo, find_scenario, prepare_project
    from speculate.session import SessionConfig, open_session
    from speculate.sim.scenario import default_scenario_paths
    from speculate.sim.scenario_yaml import load_scenario

    demo: Demo | None = None
    scenarios: list[Path] = []
    temp: Path | None = None
    fresh_dir = (
        args.dir is None
        or not Path(args.dir).expanduser().exists()
        or (Path(args.dir).expanduser().is_dir() and not any(Path(args.dir).expanduser().iterdir()))
    )
    if args.scenario or (is_simulator(args.model) and fresh_dir):  # an existing project gets no script
        path = find_scenario(args.scenario or DEFAULT_SCENARIO)
        demo = Demo(load_scenario(path))
        scenarios = [*default_scenario_paths()]
        if path not in scenarios:
            scenarios.append(path)
    if args.dir is not None:
        project = Path(args.dir).expanduser().resolve()
        if demo is not None and fresh_dir:
            prepare_project(demo.scenario, project)
        elif project.exists() and not project.is_dir():
            raise NotADirectoryError(f"{args.dir!r} is a file, not a project directory")
        elif not project.is_dir():
            raise NotADirectoryError(f"project directory {args.dir!r} does not exist")
    elif demo is not None:
        temp = temp_dir("demo")
        project = prepare_project(demo.scenario, temp / "project")
    else:
        project = Path.cwd()
    recovered = recover_project(project, scan=True)  # before anything else touches the project
    if recovered is not None:
        print(visible(recovered.line()))
    cleaned = clean_stale()  # what killed speculate processes left in $TMPDIR
    if cleaned:
        print(visible(cleaned.line()))
    own = demo is not None and (fresh_dir or temp is not None)  # a demo project speculate made
    perms = _permissions(args, project, own=own, demo=demo is not None)
    mode = perms.mode

    plain = args.plain or not (sys.stdin.isatty() and sys.stdout.isatty())
    saved = requested(args, project)
    study = None
    if args.study is not None:
        from speculate.repl.study import recorder

        study = recorder(args, plain=plain)

    def submitted(prompt: str) -> None:
        if study is not None:
            study.submitted(prompt)
        if demo is not None:
            demo.submitted(prompt)

    def cleared() -> None:
        if study is not None:
            study.cleared()
        if demo is not None:
            demo.cleared()

    repl = Repl(
        model_label=f"{args.model}" + (f" at {args.base_url}" if args.base_url else ""),
        fallback_prediction=demo.next_prompt if demo else None,
        on_submitted=submitted,
        on_cleared=cleared,
        policy=args.on_diverge,
    )
    repl.study = study
    repl.status.study = study is not None
    if plain:
        from speculate.repl.plain import PlainFrontend

        repl.attach(PlainFrontend())
        terminal: Callable[[], AbstractContextManager[object]] = nullcontext
    else:
        from prompt_toolkit.formatted_text import FormattedText
        from prompt_toolkit.history import FileHistory

        from speculate.repl.app import PromptFrontend
        from speculate.repl.terminal import enter_stays_enter

        terminal = enter_stays_enter

        from prompt_toolkit.application import get_app
        from prompt_toolkit.history import History, InMemoryHistory

        from speculate.repl.commands import MENU
        from speculate.repl.complete import ReplCompleter

        history: History = InMemoryHistory()  # a study's prompts are written in its directory only
        if study is None:
            hist = history_path()
            hist.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(hist))

        def toolbar() -> FormattedText:
            text = repl.status.line(width=get_app().output.get_size().columns - 2)
            return FormattedText([("", " " + text.replace("\n", "\n "))])

        repl.attach(
            PromptFrontend(
                toolbar=toolbar,
                on_diverge=repl.diverged,
                history=history,
                policy=args.on_diverge,
                on_stop=repl.stop_speculation,
                # In a study Ctrl-C at the prompt clears the line in every arm.
                running=repl.speculation_running if study is None else lambda: False,
                completer=ReplCompleter(MENU, lambda: project),
                on_mode_cycle=repl.cycle_mode,
            )
        )
    if study is not None:
        from speculate.repl.study import StudyFrontend

        assert repl.fe is not None
        repl.attach(
            StudyFrontend(repl.fe, study, model_suggestion=lambda: repl.s.suggestion if repl.s else None)
        )
    print(
        visible(
            f"speculate: project {project}"
            + (f" (scenario {demo.scenario.name})" if demo else "")
            + f"; model {args.model}; mode {mode}"
            + (
                " (the settings' defaultMode)"
                if perms.from_settings
                else " (the demo's; --permission-mode default asks before edits)"
                if demo is not None and args.mode is None
                else ""
            )
            + f"; speculation {'off' if args.no_spec else 'drawn per turn (study)' if study else 'on'}"
        )
    )
    if not args.no_spec:  # said once: whether a speculation may run Bash, and if not, why
        from speculate.speculation.sandbox_shell import bash_sandbox

        print(visible(f"speculative Bash: {bash_sandbox().line}"))
    if is_simulator(args.model) and demo is None:  # said once: why no ghost text will appear here
        print(
            "note: the simulator answers only the prompts of its scenarios, so on your own project every prompt "
            "gets a marked fallback answer and there is nothing to predict (no ghost text). `speculate repl` "
            "with no DIR runs the demo; for a real model: speculate repl DIR --model anthropic "
            "(ANTHROPIC_API_KEY set, or --base-url URL)."
        )
    print("Tab takes the grey prediction; /help lists commands; Ctrl-D leaves.")
    bcfg = BackendConfig(
        backend=args.model,
        base_url=args.base_url,
        scenarios=scenarios,
        time_scale=args.time_scale,
        record=args.record,
        trace=args.trace,
        connect_timeout_s=args.connect_timeout,
        read_timeout_s=args.read_timeout,
        on_notice=repl.notice,
    )
    scfg_extra = {"model_name": args.model_name} if args.model_name else {}
    spill = temp_dir("repl-spill")  # long tool outputs; gone at exit (or at the next start, after a kill)

    def on_event(ev: Any) -> None:
        if study is not None:
            study.on_event(ev)
        repl.on_event(ev)

    ask = repl.ask
    approve: ApproveFn | None = repl.approve
    if study is not None:  # the time a person takes to answer is part of a turn's latency: recorded apart
        from speculate.repl.study import timed

        # No list question at acceptance in a study: the live path's questions, one by one, in its words, and
        # not again by a live turn after a no (approvals.ask_each), so that no question tells the arm.
        ask, approve = timed(study, repl.ask), None
    try:
        async with (
            open_model(bcfg) as model,
            open_session(
                SessionConfig(
                    project=project,
                    model=model,
                    mode=mode,
                    allow=perms.allow,
                    deny=perms.deny,
                    additional_dirs=perms.add_dirs,
                    trusted=perms.trusted,
                    speculate=not args.no_spec,
                    events_path=args.events,
                    spill_dir=spill,
                    keep_accepted_diff=True,
                    keep_records=KEEP_RECORDS,
                    spec_value=args.spec_value,
                    spec_candidates=args.spec_candidates,
                    spec_edits=args.spec_edits,  # over the settings' speculation.edits
                    spec_edits_default="ask",  # a person is there to read the diffs (docs/speculation.md)
                    # saved for --continue; a study writes nothing outside its directory
                    transcript_path=None if study is not None else new_path(project),
                    **scfg_extra,
                    **({"hook_transcript_dir": args.study / "hook-transcripts"} if study is not None else {}),
                ),
                ask=ask,
                on_event=on_event,
                approve=approve,
            ) as session,
        ):
            # Settings speculate ignores (an untrusted workspace's allow rules too), MCP servers that failed.
            for note in [*perms.notes, *session.workspace.notes]:
                print(visible(f"note: {note}"))
            if saved is not None:
                restore(repl, session, saved, demo, keep_mode=args.mode is not None)
            if study is not None:
                study.attach(session)  # draws the first turn's arm
            # Everything the session started with (modules, schemas, the simulator) is long-lived: frozen out of
            # the cyclic collector, so that the collection after each turn walks only what turns made.
            gc.collect()
            gc.freeze()
            try:
                with terminal():
                    await repl.run(session, signals)
            finally:
                gc.unfreeze()
    finally:
        shutil.rmtree(spill, ignore_errors=True)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        if study is not None:  # after the session: its last, undecided cycle is recorded by now
            study.close()
            print(
                visible(
                    study.listing()
                    if args.study_reveal
                    else study.summary() + "; --study-reveal (or /study before leaving) lists each turn's arm"
                )
            )
    if repl.signal is not None:
        return 128 + repl.signal
    print("bye")
    return 0
