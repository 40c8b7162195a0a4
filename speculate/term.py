"""Untrusted text on a terminal: shown, never interpreted.

Model text, tool and hook output, MCP results, file names and diffs are written by code nobody has read. A
terminal interprets what they hold: OSC 52 sets the clipboard, OSC 8 makes links, CSI sequences clear the
screen or move the cursor, a title sequence rewrites the window title, a bare carriage return overwrites
the line. :func:`visible` turns every control character into printable text (``ESC`` becomes ``^[``, so
``\\x1b]52;c;…\\x07`` reads ``^[]52;c;…^G``), keeping only newlines and tabs. Each character is rendered on
its own, so text cut anywhere (the model's stream arrives in deltas) can never join into a sequence
across a cut: no escape byte reaches the terminal at all.

Our own colours are added after that, by :func:`render`, from the style of each fragment, never from text.
"""

from __future__ import annotations

from collections.abc import Sequence

# Plain text, or fragments of (SGR parameters, text) such as [("31", "✗"), ("", " Bash(ls)")].
Fragments = str | Sequence[tuple[str, str]]


def _table() -> dict[int, str]:
    table = {c: f"^{chr(c + 64)}" for c in range(0x20) if chr(c) not in "\t\n"}  # C0: ^@ .. ^_ (ESC is ^[)
    table[0x7F] = "^?"
    table.update({c: f"<{c:02x}>" for c in range(0x80, 0xA0)})  # C1 (0x9b is a one-character CSI)
    # Lone surrogates: bytes that were not UTF-8 (os.fsdecode's surrogateescape) would be written raw.
    table.update({c: f"<{c - 0xDC00:02x}>" for c in range(0xDC80, 0xDD00)})
    table.update({c: f"<U+{c:04X}>" for c in range(0xD800, 0xE000) if c not in table})
    return table


_VISIBLE = _table()


def visible(text: str) -> str:
    """``text`` with every control character shown as text: C0 as ``^X`` (a bare ``\\r`` as ``^M``; a
    ``\\r\\n`` line end is a newline), DEL as ``^?``, C1 and undecodable bytes as ``<9b>``; ``\\n`` and
    ``\\t`` kept."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


def render(text: Fragments, *, color: bool) -> str:
    """``text`` made :func:`visible`, each fragment then coloured by its SGR parameters when ``color``."""
    if isinstance(text, str):
        return visible(text)
    return "".join(
        f"\x1b[{style}m{visible(part)}\x1b[0m" if color and style else visible(part) for style, part in text
    )
