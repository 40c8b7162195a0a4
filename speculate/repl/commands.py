"""The REPL's slash commands, what /help says, and how /stats reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, get_args

from speculate.errors import SpeculateError
from speculate.session import PermissionMode

if TYPE_CHECKING:
    from speculate.repl.controller import Repl

HELP = """commands:
  /help                 this list
  /spec on|off          turn speculation on or off
  /mode MODE            permission mode: default | acceptEdits | bypassPermissions | plan | dontAsk
  /diff [last]          what the running speculation would change (else, or with last: what the last
                        accepted speculation changed in the project), coloured
  /last                 the last collapsed tool result, whole (ctrl+o on an empty line; during a turn too)
  /stats                acceptance, time saved, tokens and cost wasted
  /study                in a study (repl --study DIR): the arm of each finished turn, and where it is recorded
  /model                the model backend in use
  /memory, /context     the instructions files loaded (CLAUDE.md, ...) and the system prompt's size
  /mcp                  the MCP servers and their tools
  /hooks                the hooks loaded from the settings files, by event
  /clear                forget the conversation (the project is untouched)
  /compact              replace the conversation by a model-written summary (frees the context window)
  /accept               submit the predicted prompt (waits for it; handy in line mode)
  /quit                 leave (Ctrl-D does the same)
keys: Tab or Right takes the grey prediction; Enter sends; Esc-Enter, Ctrl-J or a trailing \\ start a new line;
  Esc or Ctrl-C stops the running turn; at the prompt Ctrl-C stops a running speculation, again clears the line;
  Esc at a question answers no; Ctrl-R searches the history. Typing over the prediction hides it; edit back
  and it returns. Keys typed during a turn wait in the next prompt (sent by their Enter, unless the turn was
  cancelled: then only a fresh Enter sends them)."""

MODES: tuple[str, ...] = get_args(PermissionMode)
NO_ARGS = (
    "/help",
    "/last",
    "/stats",
    "/study",
    "/memory",
    "/context",
    "/mcp",
    "/hooks",
    "/model",
    "/clear",
    "/compact",
    "/accept",
    "/quit",
    "/exit",
)


class Quit(SpeculateError):
    """Leave the REPL (``/quit``, Ctrl-D, end of input)."""


async def run_command(r: Repl, text: str) -> None:
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
            r._line(
                f"/spec takes on or off, not {arg!r}"
                if arg
                else f"speculation is {'on' if r.s.cfg.speculate else 'off'}; /spec on|off"
            )
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
        r.s.set_mode(cast(PermissionMode, arg))
        r.status.mode = arg
        r._line(f"permission mode {arg}")
    elif name == "/diff":
        if arg not in ("", "last"):
            r._line(f"/diff takes no arguments (got {arg!r}); /diff last shows the last accepted change")
            return
        if r.study is not None and arg != "last":  # whether a speculation runs would tell the turn's arm
            r._line(
                "/diff of the running speculation is hidden during a study; /diff last shows the last "
                "accepted change"
            )
            return
        show_diff(r, last=arg == "last")
    elif name == "/last":
        r.show_last()
    elif name == "/stats":
        r._line(format_stats(r.s.statistics(), scripted=r.scripted_offered))
    elif name in ("/memory", "/context"):
        from speculate.repl.info import format_memory

        r._line(format_memory(r.s))
    elif name == "/mcp":
        from speculate.repl.info import format_mcp

        r._line(format_mcp(r.s))
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


def show_diff(r: Repl, *, last: bool = False) -> None:
    """``/diff``: the running speculation's changes, else (or with ``last``) the last accepted speculation's,
    coloured."""
    from speculate.repl.toolview import coloured_diff

    assert r.s is not None
    diff = "" if last else r.s.diff()
    accepted = r.s.accepted_diff()
    if diff:
        r._line(r._c("1", "what the running speculation would change (nothing of it is in the project yet):"))
        r._lines(coloured_diff(diff))
        if accepted:
            r._line(r._c("2", "(/diff last: what the last accepted speculation changed)"))
    elif accepted:
        r._line(r._c("1", "what the last accepted speculation changed in the project:"))
        r._lines(coloured_diff(accepted))
    elif last:
        r._line("(no speculation was accepted yet)")
    else:
        r._line("(the current speculation changes nothing)")


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
            f"{st.get('suggestions', 0)} made, {st.get('suggestions_shown', 0)} shown: {counts(sugg)}",
        ),
        ("acceptance rate", f"{st.get('acceptance_rate', 0.0):.0%} of the suggestions shown"),
        ("speculations", f"{st.get('speculations', 0)}: {counts(spec)}"),
        ("stopped at", counts(st.get("boundaries", {}))),
        ("time saved", f"{st.get('time_saved_s', 0.0):.1f}s"),
        (
            "wasted tokens",
            f"{st.get('wasted_tokens', 0)} by speculations, {st.get('wasted_suggestion_tokens', 0)} "
            f"by suggestions; {st.get('tokens_after_divergence', 0)} spent after typing over one",
        ),
        ("cost", f"${st.get('cost_usd', 0.0):.4f} (wasted ${st.get('wasted_cost_usd', 0.0):.4f})"),
    ]
    if st.get("suppressed_reasons"):
        rows.insert(3, ("not shown", counts(st["suppressed_reasons"])))
    if scripted:
        rows.insert(
            2,
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
