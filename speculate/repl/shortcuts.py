"""What a prompt line starting with ``!`` or ``#``, or mentioning ``@path``, does before (or instead of) a
turn, as in Claude Code: ``!cmd`` runs the command in the project through the same permission gate as the
model's Bash calls and puts it and its output into the conversation (Claude Code's bash mode: no request
is sent); ``#text`` appends a line to an instructions file, asking which; each ``@path`` is attached as
Claude Code attaches it (:func:`speculate.repl.inputs.attachment_blocks`).

Each changes the conversation the running speculation was forked from, so that speculation is dismissed
first (it would answer a conversation that no longer exists)."""

from __future__ import annotations

from typing import Any

from speculate.agent_types import ToolDenied
from speculate.repl.inputs import (
    MAX_ATTACH_BYTES,
    MEMORY_FILES,
    add_memory,
    attachment_blocks,
    bash_messages,
    memory_path,
    mentions,
    resolve_mention,
)
from speculate.tools import registry
from speculate.tools.base import ToolError
from speculate.types import user

SHOWN_LINES = 20  # of a ! command's output; the conversation gets all of it


async def _into_conversation(r: Any, blocks: list[str]) -> None:
    """Add ``blocks`` as user text before the next prompt (the next turn's prompt joins that message)."""
    r._cancel_prediction()
    r.fe.push(None)
    if r.s.cfg.speculate:
        await r.s.dismiss("typed")
    msgs = r.s.messages
    if msgs and msgs[-1]["role"] == "user":
        msgs[-1]["content"] += user(*blocks)["content"]
    else:
        msgs.append(user(*blocks))


async def bash_mode(r: Any, command: str) -> None:
    """``!command``: run it (asking as a Bash call would), show it, and add it and its output to the
    conversation."""
    tool = next((t for t in r.s.tools if t.name == registry.SHELL), None)
    if tool is None:
        r._line(r._c("31", "! not run: the Bash tool is denied in this session's settings"))
        return
    block = {"type": "tool_use", "id": "bash-mode", "name": "Bash", "input": {"command": command}}
    try:
        inp = tool.parse(block["input"])
        await r.s.authorizer.authorize(tool, inp, block)
    except (ToolDenied, ToolError) as e:
        r._line(r._c("31", f"! {command}: not run: {e}"))
        return
    try:
        result = await tool.call(inp, r.s.ctx)
        out, err = result.content if isinstance(result.content, str) else str(result.content), ""
        if result.is_error:
            out, err = "", out
    except ToolError as e:
        out, err = "", str(e)
    r._line(r._c("35", f"! {command}"))
    lines = (out or err).rstrip("\n").splitlines()
    for ln in lines[:SHOWN_LINES]:
        r._line([("2", "  ⎿ " if ln is lines[0] else "    "), ("31" if err else "", ln)])
    if len(lines) > SHOWN_LINES:
        r._line(r._c("2", f"    … {len(lines) - SHOWN_LINES} more lines (in the conversation whole)"))
    await _into_conversation(r, bash_messages(command, out, err))
    r._predict_next()


async def memory(r: Any, text: str) -> None:
    """``#text``: ask which instructions file, then append ``- text`` to it."""
    choices = (*MEMORY_FILES, "cancel")
    q = "save this memory to " + ", ".join(f"{k} ({v})" for k, v in MEMORY_FILES.items()) + "?"
    try:
        where = await r.fe.ask(q, choices)
    except (KeyboardInterrupt, EOFError):
        where = "cancel"
    if where == "cancel":
        r._line("memory not saved")
        return
    path = memory_path(r.s.project, where)
    try:
        add_memory(path, text)
    except OSError as e:
        r._line(r._c("31", f"memory not saved: {path}: {e.strerror}"))
        return
    r._line(r._c("32", f"memory saved to {path}; it applies from the next prompt"))


async def attach_mentions(r: Any, prompt: str) -> bool:
    """Attach each ``@path`` the prompt mentions (a readable text file the gate lets Read); say what was
    attached and what was not, and why. True: send the prompt."""
    found = mentions(prompt)
    if not found:
        return True
    read = next((t for t in r.s.tools if t.name == registry.READER), None)
    blocks: list[str] = []
    for m in found:
        path = resolve_mention(r.s.project, m)
        why = ""
        if not path.is_file():
            why = "a directory" if path.is_dir() else "no such file"
        elif path.stat().st_size > MAX_ATTACH_BYTES:
            why = f"larger than {MAX_ATTACH_BYTES // 1024} KiB (the model can Read parts of it)"
        elif read is None:
            why = "the Read tool is denied in this session's settings"
        else:
            d = r.s.authorizer.gate.check(read, {"file_path": str(path)})
            if d.behavior != "allow":
                why = f"reading it is not allowed here ({d.reason})"
        data = b""
        if not why:
            data = path.read_bytes()
            if b"\0" in data[:8192]:
                why = "a binary file"
        if why:
            r._line(r._c("33", f"  @{m}: not attached: {why}"))
            continue
        text = data.decode("utf-8", errors="replace")
        blocks += attachment_blocks(path.resolve(), text)
        n = text.count("\n") + (not text.endswith("\n"))
        r._line(r._c("2", f"  ⎿ Read {m} ({n} line{'s' * (n != 1)})"))
    if blocks:
        await _into_conversation(r, blocks)
    return True
