"""``speculate bench --spec-edits``: stop-at-edit and ask-at-acceptance as conditions (#37 item 2), the
default unchanged, a bad value named."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import bench_main
from bench.run_options import build_config, build_parser


def config(*args: str):
    return build_config(build_parser().parse_args(["--quick", *args]))


def test_stop_and_ask_are_one_condition_each_and_the_default_is_stop() -> None:
    (plain,) = config().conditions
    assert plain.spec_edits == "stop" and plain.label == "lognormal natural claude-sonnet-4-6"
    stop, ask = config("--spec-edits", "stop,ask").conditions
    assert (stop.spec_edits, ask.spec_edits) == ("stop", "ask")
    assert ask.label == "lognormal natural claude-sonnet-4-6 edits:ask" and stop.label == plain.label


def test_a_bad_value_is_refused_naming_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--spec-edits", "stop,maybe", "--out", str(tmp_path / "x")]) == 2
    assert "--spec-edits 'stop,maybe'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
