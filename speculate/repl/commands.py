"""The REPL's slash commands, what /help says, and how /stats reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, get_args

from speculate.errors import SpeculateError
from speculate.repl.status import Status
from speculate.session import PermissionMode, Session
from speculate.term import Fragments

# (name, arguments, what it does): /help's list and the menu that opens on "/" (speculate.repl.complete).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("/help", "", "this list"),
    ("/spec", "[on|off]", "the speculation policy and its settings; on or off turns speculation on or off"),
    (
        "/mode",
        "MODE",
        "permission mode: default | acceptEdits | bypassPermissions | plan | dontAsk "
        "(shift+tab cycles default, acceptEdits, plan)",
    ),
    (
        "/diff",
        "[last]",
        "what the running speculation would change (else, or with last: the last accepted "
        "change), coloured; files git ignores in one line",
    ),
    ("/last", "", "the last collapsed tool result, whole (ctrl+o on an empty line; during a turn too)"),
    ("/stats", "", "suggestions, speculations, time saved, and what each spent"),
    ("/study", "", "in a study (repl --study DIR): the arm of each finished turn, and where it is recorded"),
    ("/model", "", "the model backend in use"),
    ("/memory", "", "the instructions files loaded (CLAUDE.md, ...); #text adds a line to one"),
    ("/context", "", "the instructions files loaded and the system prompt's size"),
    ("/mcp", "", "the MCP servers and their tools"),
    ("/hooks", "", "the hooks loaded from the settings files, by event"),
    ("/resume", "", "the saved sessions of this project (speculate --resume ID continues one)"),
    ("/clear", "", "forget the conversation (the project is untouched)"),
    ("/compact", "", "replace the conversation by a model-written summary (frees the context window)"),
    ("/accept", "", "submit the predicted prompt (waits for it; handy in line mode)"),
    ("/quit", "", "leave (Ctrl-D does the same)"),
    ("/exit", "", "leave"),
)
KEYS = """keys: Tab or Right takes the grey prediction (or completes a / command or an @path); Enter sends;
  Esc-Enter, Ctrl-J or a trailing \\ start a new line; shift+tab cycles the permission mode;
  Esc or Ctrl-C stops the running turn; at the prompt Ctrl-C stops a running speculation, again clears the line;
  Esc at a question answers no; Ctrl-R searches the history. Typing over the prediction hides it; edit back
  and it returns. Keys typed during a turn wait in the next prompt (sent by their Enter, unless the turn was
  cancelled: then only a fresh Enter sends them).
input: @path attaches a file (as Claude Code does); !cmd runs a shell command in the project (asking as a
  command would) and puts its output into the conversation; #text adds a line to CLAUDE.md (it asks which);
  a large paste shows as [Pasted text #N +L lines] and is sent whole."""
HELP = (
    "commands:\n"
    + "\n".join(f"  {(n + ' ' + a).strip():<21} {d}" for n, a, d in COMMANDS if n != "/exit")
    + "\n"
    + KEYS
)
MENU: tuple[tuple[str, str], ...] = tuple((n, d) for n, _, d in COMMANDS)

MODES: tuple[str, ...] = get_args(PermissionMode)
CYCLE: tuple[str, ...] = ("default", "acceptEdits", "plan")  # shift+tab, as Claude Code cycles


def next_mode(mode: str, *, bypass: bool = False) -> str:
    """shift+tab's next mode, as Claude Code 2.1.332 cycles: default → acceptEdits → plan → (bypassPermissions,
    when the session may use it: it started in it) → default; dontAsk → default."""
    if mode in ("default", "acceptEdits"):
        return CYCLE[CYCLE.index(mode) + 1]
    if mode == "plan" and bypass:
        return "bypassPermissions"
    return "default"


NO_ARGS = tuple(n for n, a, _ in COMMANDS if not a)


class Quit(SpeculateError):
    """Leave the REPL (``/quit``, Ctrl-D, end of input)."""


class Host(Protocol):
    """What the commands use of the REPL (:class:`speculate.repl.controller.Repl` is one): typed here so
    that this module needs nothing of the controller, which imports it."""

    s: Session | None
    fe: Any
    status: Status
    study: Any
    model_label: str
    scripted_offered: int
    last_diff: str
    on_cleared: Callable[[], None]

    def _line(self, text: Fragments) -> None: ...
    def _lines(self, lines: list[list[tuple[str, str]]]) -> None: ...
    def _c(self, code: str, text: str) -> list[tuple[str, str]]: ...
    def _predict_next(self) -> None: ...
    def _cancel_prediction(self) -> None: ...
    def show_last(self) -> None: ...
    def set_mode(self, mode: str) -> None: ...
    async def wait_prediction(self) -> str | None: ...
    async def submit(self, prompt: str) -> object: ...


async def run_command(r: Host, text: str) -> None:
    assert r.s is not None and r.fe is not None
    name, _, arg = text.partition(" ")
    arg = arg.strip()
    if name in NO_ARGS and arg:
        r._line(f"{name} takes no arguments (got {arg!r}); /help lists the commands")
        return
    if name in ("/quit", "/exit"):
        raise Quit
    if name == "/help":
        r._line(HELP)
    elif name == "/spec" and r.study is not None:
        r._line("/spec: in a study each turn's arm is drawn at random (/study lists them); it cannot be set")
    elif name == "/study":
        r._line(
            r.study.listing()
            if r.study is not None
            else "no study runs: speculate repl --study DIR starts one"
        )
    elif name == "/spec":
        if arg not in ("on", "off"):
            r._line(f"/spec takes on or off, not {arg!r}" if arg else spec_settings(r.s))
            return
        await r.s.set_speculation(arg == "on")
        r.status.set_speculation(arg == "on")
        r._line(f"speculation {arg}")
        if arg == "off":
            r._predict_next()
    elif name == "/mode":
        if arg not in MODES:
            r._line(
                f"unknown permission mode {arg!r}: choose one of {', '.join(MODES)}"
                if arg
                else f"mode is {r.s.cfg.mode}; /mode {'|'.join(MODES)}"
            )
            return
        r.set_mode(arg)
        r._line(f"permission mode {arg}")
    elif name == "/diff":
        if arg not in ("", "last"):
            r._line(f"/diff takes no arguments (got {arg!r}); /diff last shows the last accepted change")
            return
        if r.study is not None:  # a running speculation, or an accepted one, would tell the turns' arms
            r._line("/diff is hidden during a study (it would tell the arms); /study lists each turn's arm")
            return
        show_diff(r, last=arg == "last")
    elif name == "/last":
        r.show_last()
    elif name == "/stats" and r.study is not None:  # its time saved and accepted turns tell the arms
        r._line("/stats is hidden during a study (it would tell the arms); /study lists each turn's arm")
    elif name == "/stats":
        r._line(format_stats(r.s.statistics(), scripted=r.scripted_offered))
    elif name in ("/memory", "/context"):
        from speculate.repl.info import format_memory

        r._line(format_memory(r.s))
    elif name == "/mcp":
        from speculate.repl.info import format_mcp

        r._line(format_mcp(r.s))
    elif name == "/resume":
        from speculate.repl.resume import listing

        r._line(listing(r.s.project))
    elif name == "/hooks":
        r._line(r.s.hooks.listing())
    elif name == "/model":
        r._line(f"model: {r.s.cfg.model_name} via {r.model_label or r.s.cfg.model.name}")
    elif name == "/clear":
        r._cancel_prediction()
        r.fe.push(None)
        await r.s.clear()
        r.on_cleared()
        r._line("conversation cleared")
        r._predict_next()
    elif name == "/compact":
        from speculate.compaction import CompactionFailed

        r._cancel_prediction()
        r.fe.push(None)
        try:
            rec = await r.s.compact()
        except CompactionFailed as e:
            r._line(str(e))
        else:
            r._line(f"conversation compacted: {rec.messages_before} messages -> a summary")
        r._predict_next()
    elif name == "/accept":
        r._cancel_prediction()
        prediction = await r.wait_prediction()
        if r.study is not None and r.study.arm == "plain":
            prediction = None  # the study's plain arm shows no prediction, so none can be taken
        if prediction is None:
            r._line("no prediction to accept")
            r._predict_next()
        else:
            r._line(f"› {prediction}")
            await r.submit(prediction)
    else:
        r._line(f"unknown command {name!r}; /help lists them")


def show_diff(r: Host, *, last: bool = False) -> None:
    """``/diff``: the running speculation's changes, else (or with ``last``) the last accepted change that
    changed something, coloured; the files git ignores summarised in one line."""
    from speculate.repl.diffview import summarise_ignored
    from speculate.repl.toolview import coloured_diff

    assert r.s is not None
    diff = "" if last else r.s.diff()
    accepted = r.last_diff

    def show(text: str) -> None:
        shown, ignored = summarise_ignored(r.s.project if r.s is not None else Path("."), text)
        if shown.strip():
            r._lines(coloured_diff(shown))
        if ignored:
            r._line(r._c("2", ignored))

    if diff:
        r._line(r._c("1", "what the running speculation would change (nothing of it is in the project yet):"))
        show(diff)
        if accepted:
            r._line(r._c("2", "(/diff last: what the last accepted speculation changed)"))
    elif accepted:
        r._line(r._c("1", "what the last accepted speculation changed in the project:"))
        show(accepted)
    elif last:
        r._line("(no accepted speculation changed anything yet)")
    else:
        r._line("(the current speculation changes nothing)")


def spec_settings(s: Session) -> str:
    """``/spec``: whether speculation is on, the policy that decides each fork, and its settings."""
    from speculate.speculation.policy import options_for

    o = options_for(s.cfg, s.workspace.settings)
    rule = (
        "always forks (no --spec-value: every suggestion gets a fork)"
        if o.value is None
        else f"forks when value · P(accept) · saving > (1 − P) · cost, value λ = ${o.value:g} per second saved "
        "(--spec-value; the toolbar says when it abstains)"
    )
    budget = ", ".join(
        x
        for x in (
            f"{o.budget_tokens} tokens" if o.budget_tokens else "",
            f"{o.budget_cpus} CPUs" if o.budget_cpus else "",
        )
        if x
    )
    rows = [
        ("speculation", f"{'on' if s.cfg.speculate else 'off'} (/spec on|off)"),
        ("policy", rule),
        ("candidates", f"{o.candidates} (top-K: a fork per candidate the policy takes; --spec-candidates)"),
        ("budget", budget or "none (speculation.budget in the settings)"),
        (
            "prior",
            f"Beta{o.prior}, pooling {o.pooling:g}; history {'kept per project' if o.persist else 'this session only'}",
        ),
        ("mode", f"{s.cfg.mode} (a fork stops where the live path would ask, save sandboxed Bash)"),
        (
            "edits",
            f"{o.edits}: "
            + (
                "a fork's edit the live path would ask about is written into it and asked about on acceptance"
                if o.edits == "ask"
                else "a fork stops before an edit the live path would ask about"
            )
            + " (--spec-edits; settings: speculation.edits)",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def usd(x: float) -> str:
    """Dollars to four places; nothing spent reads ``$0``."""
    return "$0" if x == 0 else f"${x:.4f}"


def format_stats(st: dict[str, Any], *, scripted: int = 0) -> str:
    """The session's figures under one set of names: counts as integers, rates as percentages, times in
    seconds, costs in dollars. ``scripted``: the demo's scripted prompts offered as ghost text, which are
    not the model's suggestions and not counted as such."""

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "none"

    sugg, spec = st.get("suggestion_outcomes", {}), st.get("speculation_outcomes", {})
    rows = [
        (
            "turns",
            f"{st.get('turns', 0)} ({st.get('accepted_turns', 0)} answered by an accepted speculation)",
        ),
        (
            "suggestions",
            f"{st.get('suggestions', 0)} made, {st.get('suggestions_shown', 0)} shown: {counts(sugg)}; "
            f"{st.get('acceptance_rate', 0.0):.0%} of those shown taken",
        ),
        (
            "  spend",
            f"{usd(st.get('suggestion_cost_usd', 0.0))} ({st.get('wasted_suggestion_tokens', 0)} tokens "
            "on suggestions not taken)",
        ),
        ("speculations", f"{st.get('speculations', 0)} forks: {counts(spec)}"),
        ("  stopped at", counts(st.get("boundaries", {}))),
        ("  time saved", f"{st.get('time_saved_s', 0.0):.1f}s"),
        (
            "  spend",
            f"{usd(st.get('speculation_cost_usd', 0.0))} on forks, "
            f"{usd(st.get('wasted_speculation_cost_usd', 0.0))} of it on forks not used "
            f"({st.get('wasted_tokens', 0)} tokens; {st.get('tokens_after_divergence', 0)} after typing "
            "over a suggestion)",
        ),
    ]
    if st.get("suppressed_reasons"):
        rows.insert(3, ("  not shown", counts(st["suppressed_reasons"])))
    if scripted:
        rows.insert(
            rows.index(next(r for r in rows if r[0] == "speculations")),
            (
                "demo script",
                f"{scripted} scripted prompt{'s' * (scripted != 1)} offered as ghost text "
                "where the model had no suggestion (not counted above)",
            ),
        )
    if st.get("compactions") or st.get("compaction_failures"):
        rows.append(
            (
                "compactions",
                f"{st.get('compactions', 0)}"
                + (f" ({st['compaction_failures']} failed)" if st.get("compaction_failures") else ""),
            )
        )
    if st.get("speculative_bash"):
        rows.append(("speculative Bash", "; ".join(st["speculative_bash"])))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)
