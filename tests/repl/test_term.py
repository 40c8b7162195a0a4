"""speculate.term: untrusted text is shown on a terminal, never interpreted; our colours still work."""

from __future__ import annotations

import re

from speculate.term import render, visible

OSC52 = "\x1b]52;c;ZXZpbA==\x07"  # sets the clipboard
OSC8 = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # a hyperlink
CLEAR = "\x1b[2J\x1b[H"  # clears the screen, cursor home
TITLE = "\x1b]0;pwned\x07"  # the window title
C1 = "\x9b2J\x9d0;pwned\x9c"  # the same with one-character C1 introducers
BAIT = f"a{OSC52}b{OSC8}c{CLEAR}d{TITLE}e{C1}f\rg\x00\x7f"
# What a terminal could act on: C0 (bar \t \n), DEL, C1, lone surrogates (bytes written out raw).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def test_every_control_character_is_shown_not_kept() -> None:
    out = visible(BAIT)
    assert not CONTROL.search(out)
    assert out == (
        "a^[]52;c;ZXZpbA==^Gb^[]8;;http://evil.example/^[\\click^[]8;;^[\\c^[[2J^[[Hd^[]0;pwned^Ge"
        "<9b>2J<9d>0;pwned<9c>f^Mg^@^?"
    )


def test_newlines_and_tabs_stay_and_a_crlf_line_end_is_a_newline() -> None:
    assert visible("a\tb\nc\r\nd\re") == "a\tb\nc\nd^Me"
    assert visible("plain text, ünïcödé ✓ …") == "plain text, ünïcödé ✓ …"


def test_undecodable_bytes_are_shown_as_bytes() -> None:
    name = b"notes\x9b2J\xff.txt".decode("utf-8", "surrogateescape")  # a file name, as os.listdir gives it
    assert visible(name) == "notes<9b>2J<ff>.txt"
    assert visible("\ud800") == "<U+D800>"


def test_rendering_is_idempotent() -> None:
    once = visible(BAIT)
    assert visible(once) == once


def test_a_sequence_cut_across_stream_deltas_never_forms() -> None:
    """The model's text arrives in deltas cut anywhere: rendered one by one, no cut lets a sequence through
    (an ESC at the end of one delta and ``]52;`` at the start of the next stay two visible halves)."""
    for cut in range(len(BAIT) + 1):
        for second in range(cut, len(BAIT) + 1):
            parts = [BAIT[:cut], BAIT[cut:second], BAIT[second:]]
            out = "".join(visible(p) for p in parts)
            assert not CONTROL.search(out), (cut, second)
            assert out == visible(BAIT)  # BAIT has no \r\n, so every cut renders the same


def test_our_colours_are_added_after_and_only_from_the_style() -> None:
    frags = [("31", "✗"), ("", f" Bash({TITLE}) "), ("2", OSC52)]
    coloured = render(frags, color=True)
    assert coloured == "\x1b[31m✗\x1b[0m Bash(^[]0;pwned^G) \x1b[2m^[]52;c;ZXZpbA==^G\x1b[0m"
    assert render(frags, color=False) == "✗ Bash(^[]0;pwned^G) ^[]52;c;ZXZpbA==^G"
    assert render(TITLE, color=True) == "^[]0;pwned^G"  # plain text is never coloured, never raw
