"""The study's small parts: parsing and drawing arms, what each arm switches, classifying what was done with a
suggestion, and the consent stored in the study directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculate.study import arms, classify, consent


def test_arms_parse_to_a_canonical_order_and_bad_ones_are_named() -> None:
    assert arms.parse_arms("suggest, speculative") == ("speculative", "suggest")
    assert arms.parse_arms("plain,suggest,speculative") == ("speculative", "suggest", "plain")
    with pytest.raises(ValueError, match=r"--study-arms 'speculative,off': unknown arm 'off'"):
        arms.parse_arms("speculative,off")
    with pytest.raises(ValueError, match="two or more different arms"):
        arms.parse_arms("suggest,suggest")
    with pytest.raises(ValueError, match="two or more different arms"):
        arms.parse_arms("speculative")


def test_the_draw_is_a_function_of_the_seed() -> None:
    a = arms.sequence(7, 40)
    assert a == arms.sequence(7, 40)
    assert a != arms.sequence(8, 40)
    assert set(a) == {"speculative", "suggest"}
    three = arms.sequence(7, 300, ("speculative", "suggest", "plain"))
    assert all(60 < three.count(x) < 140 for x in ("speculative", "suggest", "plain"))  # equal probabilities


def test_each_arm_switches_the_session() -> None:
    class Cfg:
        speculate = True
        fork = True

    cfg = Cfg()
    for arm, want in (("suggest", (True, False)), ("plain", (False, False)), ("speculative", (True, True))):
        arms.apply(cfg, arm)  # type: ignore[arg-type]
        assert (cfg.speculate, cfg.fork) == want, arm


@pytest.mark.parametrize(
    ("suggestion", "prompt", "tab", "want"),
    [
        (
            "run the CLI to check page 2",
            "run the CLI to check page 2",
            False,
            "taken",
        ),  # typed exactly: taken too
        ("run the CLI to check page 2", "run the CLI to check page 2", True, "taken"),
        ("run the CLI to check page 2", "run the CLI to check page 3", True, "edited"),
        (
            "run the CLI to check page 2",
            "Run the CLI to check page 3",
            False,
            "edited",
        ),  # typed, 0.96 similar
        ("fix it and add a regression test", "fix it and add a test", False, "edited"),  # 0.79
        ("fix it and add a regression test", "fix it", True, "ignored"),  # Tab, then most of it deleted: 0.32
        ("fix it and add a regression test", "fix it", False, "ignored"),
        (
            "fix it and add a regression test",
            "fix it and also a test",
            False,
            "ignored",
        ),  # 0.70: under 0.75 typed
        (
            "fix it and add a regression test",
            "fix it and also a test",
            True,
            "edited",
        ),  # but after Tab: edited
        ("run the tests", "explain page_bounds first", False, "ignored"),
        (None, "anything", False, "none"),
    ],
)
def test_taken_edited_ignored(suggestion: str | None, prompt: str, tab: bool, want: str) -> None:
    assert classify.classify(suggestion, prompt, took_ghost=tab)[0] == want


def test_similarity_is_on_normalised_text() -> None:
    assert classify.similarity("Fix  it\n", "fix it") == 1.0
    assert classify.similarity("fix it and add a regression test", "fix it and add a test") == pytest.approx(
        0.792, abs=0.01
    )


def test_length_buckets_and_first_words() -> None:
    assert [
        classify.length_bucket(t)
        for t in (
            "",
            "yes",
            "fix it now",
            "fix the other one",
            "a b c d e f g",
            "one two three four five six seven eight nine ten",
        )
    ] == ["0", "1-3", "1-3", "4-6", "7-9", "10+"]
    assert classify.first_word("Yes, raise ValueError") == "yes"
    assert classify.first_word("  --- ") == ""


def test_consent_needs_an_explicit_yes_once_and_is_stored(tmp_path: Path) -> None:
    d = tmp_path / "study"
    said: list[str] = []
    with pytest.raises(consent.NoConsent):
        consent.obtain(d, ("speculative", "suggest"), user=None, ask=lambda q: "sure\n", say=said.append)
    assert not (d / "consent.json").exists()  # nothing recorded without a yes
    c = consent.obtain(d, ("speculative", "suggest"), user="p1", ask=lambda q: "Yes\n", say=said.append)
    stored = json.loads((d / "consent.json").read_text())
    assert stored["user"] == c.user == "p1" and "Nothing leaves this machine" in stored["text"]
    assert str(d) in said[0] and "Not recorded: the model's answers" in said[0]

    def no_question(q: str) -> str:
        raise AssertionError("asked again")

    again = consent.obtain(d, ("speculative", "suggest"), user=None, ask=no_question, say=said.append)
    assert again.user == "p1" and len(said) == 3  # the consent line is shown every time
    with pytest.raises(ValueError, match="belongs to participant 'p1'"):
        consent.obtain(d, ("speculative", "suggest"), user="p2", ask=no_question, say=said.append)
    (d / "consent.json").write_text("{}")
    with pytest.raises(ValueError, match=r"consent\.json: not a consent record"):
        consent.load(d)
