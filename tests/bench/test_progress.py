"""The bench's progress lines on stderr: a failed session's line quotes its error, which can hold a command's
output or a model's text, so its escape sequences are shown, never sent to the terminal (issue #22, E4)."""

from __future__ import annotations

import re

import pytest

from bench.cli import show_progress


def test_a_failed_session_s_line_shows_its_escape_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    error = "RuntimeError: \x1b]52;c;aGk=\x07 \x1b]8;;http://evil/\x1b\\l\x1b]8;;\x1b\\ \x1b[2J \x1b]0;t\x07 \x9b2J"
    show_progress(f"session plain-fix-1 failed: {error}")  # the line run_experiment writes for a failure
    err = capsys.readouterr().err
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", err), err
    assert err == (
        "session plain-fix-1 failed: RuntimeError: ^[]52;c;aGk=^G ^[]8;;http://evil/^[\\l^[]8;;^[\\ "
        "^[[2J ^[]0;t^G <9b>2J\n"
    )
