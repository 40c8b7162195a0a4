"""A study in a real terminal (tmux): `speculate repl --study DIR` on the simulator demo, driven by a simulated
person who takes a suggestion, ignores one by typing something else, edits one after Tab, types one exactly
without Tab, and takes another; the JSONL it writes is read back: the arms are the seed's, each choice is
classified as it was made, the timings are there and in order, and nothing on screen told the arm before the
prompt was sent. Then the plain arm: no ghost text at all, not even the demo's."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from speculate.study.arms import sequence
from tests.repl.tmuxkit import P1, P2, Term

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
P3 = "run the CLI to check page 2"
P4 = "does total_pages have the same problem?"
SEED = (
    2  # speculative, suggest, suggest, speculative, suggest, speculative (blocked draws since #36): turns 2
)
# and 6 (the model's suggestions, taken) fall in different arms


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")


def start(tmp_path: Path, project: Path, study: Path, extra: str = "") -> Term:
    t = Term()
    t.start(
        f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
        f"--scenario fix-pagination --time-scale 0.05 --study {study} {extra}; echo EXIT=$?; sleep 60"
    )
    return t


def records(study: Path) -> list[dict[str, Any]]:
    files = sorted((study / "sessions").glob("*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def ghost(t: Term, text: str) -> None:
    """Wait until ``text`` is the ghost text of an empty prompt, then a moment (the person reads it)."""
    t.answer_until(lambda: t.input_line().strip() == f"› {text}", f"the ghost text {text!r}", timeout=60)
    t.wait(lambda: "study" in t.toolbar(), "the toolbar")  # drawn after the input line
    assert not any(s in t.toolbar() for s in ("speculat", "ready (", "boundary")), t.toolbar()
    time.sleep(0.3)


def test_a_simulated_person_in_a_study(tmp_path: Path, project: Path) -> None:
    study = tmp_path / "study"
    t = start(tmp_path, project, study, f"--study-seed {SEED} --study-reveal")
    try:
        t.wait(lambda: "Type yes to agree" in t.screen(), "the consent question")
        assert "Nothing leaves this machine" in t.scrollback() and str(study) in t.scrollback().replace(
            "\n", ""
        )
        t.type("yes")
        t.keys("Enter")
        ghost(t, P1)  # 1: the demo's scripted prompt (no suggestion cycle before a first turn): Tab
        t.keys("Tab")
        time.sleep(0.2)
        t.keys("Enter")
        ghost(t, P2)  # 2: the model's suggestion, taken as it is
        t.keys("Tab")
        time.sleep(0.2)
        t.keys("Enter")
        ghost(t, P3)  # 3: ignored: something else typed (off the script: the simulator's fallback answers)
        t.type("explain page_bounds first")
        t.keys("Enter")
        # After that detour the model suggests nothing: the demo offers its scripted prompt again.
        ghost(t, P3)  # 4: taken with Tab, then edited
        t.keys("Tab")
        time.sleep(0.2)
        t.keys("BSpace")
        t.type("3")
        t.keys("Enter")
        ghost(t, P3)  # 5: typed out exactly, no Tab (in two bursts): taken
        t.type(P3[:11])
        time.sleep(0.7)  # asserted as >= 0.5 below: the margin absorbs when the REPL reads each burst
        t.type(P3[11:])
        t.keys("Enter")
        ghost(t, P4)  # 6: taken
        t.keys("Tab", "Enter")
        t.answer_until(
            lambda: (
                t.input_line().startswith("›")
                and t.scrollback().count("› /study") == 0
                and "working" not in t.toolbar()
                and P4 not in t.input_line()
            ),
            "the sixth answer",
            timeout=60,
        )
        t.type("/spec off")
        t.keys("Enter")
        t.wait(lambda: "/spec: in a study each turn's arm is drawn at random" in t.screen(), "/spec refused")
        t.type("/study")
        t.keys("Enter")
        t.wait(lambda: "study: 6 turns recorded in" in t.screen(), "/study's list")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
        # --study-reveal: the exit lists the arms too (once from /study, once at the exit).
        exit_part = t.scrollback().split("› /study")[-1]
        assert exit_part.count("study: 6 turns recorded in") == 2, exit_part
        rows = [
            ln.split()
            for ln in exit_part.split("study: 6 turns recorded in")[-1].splitlines()
            if ln.strip()[:1].isdigit()
        ]
        assert [r[1] for r in rows] == sequence(SEED, 6), rows
    finally:
        t.close()
    recs = records(study)
    head, assigns = recs[0], [r for r in recs if r["kind"] == "assign"]
    turns = [r for r in recs if r["kind"] == "turn"]
    assert head["kind"] == "session" and head["seed"] == SEED and head["frontend"] == "prompt"
    assert head["model"] == "sim" and head["time_scale"] == 0.05
    assert recs[-1]["kind"] == "end" and recs[-1]["turns"] == 6
    assert [a["arm"] for a in assigns] == sequence(SEED, 7) and all(a["seed"] == SEED for a in assigns)
    assert [r["arm"] for r in turns] == sequence(SEED, 6)
    assert [r["taken"] for r in turns] == ["taken", "taken", "ignored", "edited", "taken", "taken"]
    assert [r["took_ghost"] for r in turns] == [True, True, False, True, False, True]
    assert [r["suggestion_source"] for r in turns] == [
        "script",
        "model",
        "model",
        "script",
        "script",
        "model",
    ]
    assert turns[3]["prompt"] == "run the CLI to check page 3" and turns[3]["similarity"] > 0.9
    assert [r["eligible"] for r in turns] == [False, True, True, True, True, True]
    for r in turns:
        assert 0 <= r["shown_s"] <= r["first_key_s"] <= r["submit_s"], r
        assert r["think_s"] == pytest.approx(r["first_key_s"] - r["shown_s"])
        assert r["typing_s"] == pytest.approx(r["submit_s"] - r["first_key_s"])
        assert 0 <= r["ttft_s"] <= r["latency_s"], r
    assert turns[4]["typing_s"] >= 0.5  # timed from the first key of the first burst
    # The model's suggestion taken as-is: the speculative arm answered from its fork, the suggest arm did not fork.
    for r in (turns[1], turns[5]):
        assert r["accepted"] == (r["arm"] == "speculative"), r
        assert (r["speculation"] is not None) == (r["arm"] == "speculative"), r
        assert r["suggestion_outcome"] == "accepted"
    assert (turns[1]["arm"], turns[5]["arm"]) == ("suggest", "speculative")


def test_the_plain_arm_shows_no_ghost_text_and_consent_is_asked_once(tmp_path: Path, project: Path) -> None:
    study = tmp_path / "study"
    (study).mkdir()
    (study / "consent.json").write_text(json.dumps({"user": "p9", "agreed_at": 0.0, "text": "earlier"}))
    # Seed 0 draws plain for turn 1: not even the demo's scripted prompt shows.
    assert sequence(0, 2, ("suggest", "plain"))[0] == "plain"
    t = start(tmp_path, project, study, "--study-seed 0 --study-arms plain,suggest")
    try:
        t.wait(lambda: "Tab takes the grey prediction" in t.screen(), "the REPL, without a consent question")
        assert "Type yes to agree" not in t.scrollback()
        t.wait(lambda: "study" in t.toolbar(), "the toolbar")
        time.sleep(1.0)  # the demo's prompt would be there by now
        assert P1 not in t.screen(), t.screen()
        assert any(ln.strip() == "›" for ln in t.screen().splitlines()), t.screen()  # an empty prompt
        t.type("/accept")
        t.keys("Enter")
        t.wait(lambda: "no prediction to accept" in t.screen(), "nothing to take in the plain arm")
        t.type(P1[:10])
        time.sleep(0.7)  # asserted as >= 0.5 below (margin for when the REPL reads each burst)
        t.type(P1[10:])
        t.keys("Enter")
        t.wait(lambda: "off-by-one" in t.scrollback(), "the first answer")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
        # Without --study-reveal the exit says where the turns went, not their arms.
        tail = t.scrollback().split("study: 1 turn recorded in")[-1]
        assert "--study-reveal (or /study before leaving) lists each turn's arm" in tail
        assert "plain" not in tail.split("lists each turn's arm")[-1], tail
    finally:
        t.close()
    recs = records(study)
    assert recs[0]["user"] == "p9"
    turn = next(r for r in recs if r["kind"] == "turn")
    assert turn["arm"] == "plain" and turn["suggestion"] is None and turn["taken"] == "none"
    # The keys of /accept were a command's: typing is timed from the prompt's own first key.
    assert turn["commands"] == 1 and not turn["took_ghost"] and 0.5 <= turn["typing_s"] < 5


def questions_on_turn_2(tmp_path: Path, project: Path, seed: int) -> tuple[list[str], str, dict[str, Any]]:
    """A study session that takes the first two suggestions, answering y to every question; the questions
    asked on turn 2 (the demo's fix, whose test runs the live path asks about), the screen, its record."""
    study = tmp_path / f"study-{seed}"
    t = start(tmp_path, project, study, f"--study-seed {seed}")
    try:
        t.wait(lambda: "Type yes to agree" in t.screen(), "the consent question")
        t.type("yes")
        t.keys("Enter")
        ghost(t, P1)
        t.keys("Tab", "Enter")
        t.answer_until(lambda: t.input_line().strip() == f"› {P2}", "the second suggestion", timeout=60)
        time.sleep(4)  # the speculative arm's fork runs to its end meanwhile (time scale 0.05)
        t.keys("Tab", "Enter")
        asked = t.answer_until(
            lambda: t.input_line().strip() == f"› {P3}", "the third suggestion", timeout=90
        )
        screen = t.scrollback()
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()
    turns = [r for r in records(study) if r["kind"] == "turn"]
    return asked, screen, turns[1]


def test_both_arms_ask_the_same_questions_one_by_one(tmp_path: Path) -> None:
    """An accepted speculation in a study asks the live path's questions, one call at a time, in its words:
    no list question at acceptance that only the speculative arm has (#37 item 3)."""
    assert sequence(1, 2)[1] == "speculative" and sequence(2, 2)[1] == "suggest"
    scenario = load_scenario(find_scenario("fix-pagination"))
    spec_q, spec_screen, spec_turn = questions_on_turn_2(
        tmp_path, prepare_project(scenario, tmp_path / "a" / "proj"), 1
    )
    live_q, live_screen, live_turn = questions_on_turn_2(
        tmp_path, prepare_project(scenario, tmp_path / "b" / "proj"), 2
    )
    assert spec_turn["arm"] == "speculative" and spec_turn["accepted"], spec_turn  # a fork answered it
    assert spec_turn["speculation"] is not None and live_turn["speculation"] is None
    assert live_q and [q.replace("/a/proj", "/b/proj") for q in spec_q] == live_q, (spec_q, live_q)
    for screen in (spec_screen, live_screen):
        assert "accept the speculation" not in screen and "what it ran" not in screen, screen
