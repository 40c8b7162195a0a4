"""``--redact``: literals and paths become stable placeholders, the scenario still replays, and nothing the
transcript held outside its quoted strings and paths is invented or lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.check import check_main
from speculate.importers.claude_code import ImportConfig, import_sessions
from speculate.importers.redact import Redactor
from speculate.importers.tree import RepoError
from tests.importers.cc_records import Transcript, edit_turn, read_turn, text

SECRET = "TOKEN = \"hunter2-prod\"\nprint('hello world')\n"


def session(cwd: str) -> Transcript:
    t = Transcript(cwd=cwd)
    t.prompt("why does acme_billing/secret_plan.py print 'hello world'?")
    read_turn(t, "m1", "t1", "acme_billing/secret_plan.py", SECRET)
    t.message(
        "m2",
        text("It prints 'hello world'; the token is \"hunter2-prod\" (see acme_billing/secret_plan.py)."),
    )
    t.at(5).prompt("greet the moon instead", source="typed")
    # the user's edit takes the text from inside the string: it must still apply after redaction
    edit_turn(t, "m3", "t2", "acme_billing/secret_plan.py", SECRET, "hello world", "hello moon")
    t.message("m4", text("Done."))
    return t


def run(tmp: Path, **cfg: object) -> Path:
    src = session(str(tmp / "proj")).write(tmp / "in" / "s.jsonl")
    res = import_sessions(ImportConfig(paths=(src,), out=tmp / "out", redact=True, **cfg))  # type: ignore[arg-type]
    (path,) = res.written
    return path


def test_redacted_scenario_holds_no_literal_or_name_and_still_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run(tmp_path / "a")
    out = path.read_text()
    for secret in ("hunter2", "hello world", "hello moon", "secret_plan", "acme_billing"):
        assert secret not in out, secret
    assert "why does" in out and "print(" in out  # prose and code outside literals stay
    assert check_main([str(path), "--time-scale", "0.01"]) == 0, capsys.readouterr().out
    # the replayed Edit applied: its expectation (exit 0) was written and met
    assert "exit_code: 0" in out.split("greet the moon instead")[1]


def test_placeholders_are_stable_and_keyed(tmp_path: Path) -> None:
    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    # same input, same placeholders (the project directory's own path differs: it becomes {root})
    assert a.read_text().replace("cc-proj", "") == b.read_text().replace("cc-proj", "")
    keyed = run(tmp_path / "c", redact_key="k").read_text()
    assert keyed != a.read_text()
    r1, r2 = Redactor(root="/x"), Redactor(root="/y")
    assert r1.text("/x/acme/secret_plan.py") == "/x/" + r2.text("acme/secret_plan.py")
    assert r1.text("edit tests/test_secret.py") == "edit " + r1.path("tests/test_secret.py")
    assert r1.path("src/tests/conftest.py") == "src/tests/conftest.py"  # conventional names stay
    assert r1.path("tests/test_billing.py").startswith("tests/test_")  # test discovery still works
    assert len(r1.path("tests/test_billing.py")) == len("tests/test_billing.py")  # and the length stays


def test_redact_with_repo_is_refused(tmp_path: Path) -> None:
    src = session(str(tmp_path / "proj")).write(tmp_path / "s.jsonl")
    with pytest.raises(RepoError, match="--redact with --repo"):
        import_sessions(ImportConfig(paths=(src,), out=tmp_path / "out", redact=True, repo=tmp_path))
