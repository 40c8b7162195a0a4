"""What the REPL's /memory (/context) and /mcp commands show."""

from __future__ import annotations

from speculate.session import Session


def format_memory(s: Session) -> str:
    """What the system prompt holds: the instructions files in precedence order, and the parts' sizes."""
    from speculate.sim.tokens import text_tokens

    ins = s.workspace.instructions
    lines = [
        f"instructions: {len(ins.files)} file{'s' * (len(ins.files) != 1)}, ~{ins.tokens} tokens "
        "(lowest precedence first; an edit takes effect on the next turn)"
    ]
    lines += [
        f"  {f.scope:<8} ~{f.tokens:>6} tokens  {f.path}"
        + (f" (@ in {f.imported_by.name})" if f.imported_by else "")
        for f in ins.files
    ]
    if not ins.files:
        lines.append(
            "  none found (CLAUDE.md, .claude/CLAUDE.md, CLAUDE.local.md from the git root down, "
            "~/.claude/CLAUDE.md; AGENTS.md only through @AGENTS.md)"
        )
    static, dynamic = (*s.key.system, "", "")[:2]
    lines.append(
        f"system prompt: static ~{text_tokens(static)} tokens (shared by every session), "
        f"dynamic ~{text_tokens(dynamic)} tokens; {len(s.tools)} tools"
    )
    return "\n".join(lines)


def format_mcp(s: Session) -> str:
    mcp = s.workspace.mcp
    if mcp is None or not (mcp.servers or mcp.notes):
        return "no MCP servers (.mcp.json)"
    lines = []
    for srv in mcp.servers:
        lines.append(f"{srv.name}: {len(srv.tools)} tools")
        lines += [
            f"  {t.name}" + (" (declared read-only: a speculation may call it)" if t.read_only else "")
            for t in srv.tools
        ]
    return "\n".join(lines + mcp.notes + mcp.events)
