"""The glob matcher fuzzed against libraries that implement the same syntax (hypothesis).

- :func:`match_path` (Glob's anchored patterns: ``*``, ``?``, ``**``, ``[...]``, ``[!...]``, ``{a,b}``)
  against ``wcmatch.glob.globmatch`` with globstar, braces and dot files on.
- :func:`match_ignore_style` as its callers apply it (a path is ignored when it or a directory above it
  matches) against git itself (``git check-ignore --no-index``), the reference for gitignore. ``pathspec``
  was tried first: it lets ``[!a]`` match ``/`` (``a[!a]a`` ignores ``a/a``; git does not), so git is the
  oracle here. Braces are left out of this half: gitignore has none (ripgrep's ``--glob`` has them, and
  the Glob half covers their translation), and so is ``**`` glued to other text: git reads ``a**/a`` as
  ignoring ``aa``, which no glob reading explains; gitignore documents ``**`` only as a whole segment.
Real path segments are never ``.`` or ``..``, so neither is generated.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from speculate.tools.globmatch import match_ignore_style, match_path

wcglob = pytest.importorskip("wcmatch.glob", reason="wcmatch (a dev dependency) is not installed")


def _segments(pieces: list[str]) -> st.SearchStrategy[str]:
    return (
        st.lists(st.sampled_from(pieces), min_size=1, max_size=3)
        .map("".join)
        .filter(lambda s: s not in (".", ".."))
    )


PATHS = st.lists(_segments(["a", "b", ".", "x", "ab"]), min_size=1, max_size=4).map("/".join)
GLOBS = st.lists(
    _segments(["a", "b", "x", "*", "?", "**", "[ab]", "[!a]", "{a,b}", "{a,x*}", "."]), min_size=1, max_size=3
).map("/".join)
IGNORES = st.lists(
    _segments(["a", "b", "x", "*", "?", "**", "[ab]", "[!a]", "."]).filter(
        lambda s: s == "**" or "**" not in s
    ),
    min_size=1,
    max_size=3,
).map("/".join)
pytestmark = pytest.mark.slow  # hypothesis runs thousands of matches and ~300 git processes
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@FUZZ
@given(GLOBS, PATHS)
def test_glob_patterns_match_as_wcmatch_matches(pattern: str, rel: str) -> None:
    flags = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB
    assert match_path(pattern, rel) == wcglob.globmatch(rel, pattern, flags=flags), (pattern, rel)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not on PATH")
    root = tmp_path_factory.mktemp("ignore-oracle")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(IGNORES, st.lists(PATHS, min_size=1, max_size=6, unique=True))
def test_ignore_patterns_match_as_git_check_ignore_does(repo: Path, pattern: str, rels: list[str]) -> None:
    (repo / ".gitignore").write_text(pattern + "\n")
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=repo,
        input="\n".join(rels) + "\n",
        capture_output=True,
        text=True,
    )
    assert out.returncode in (0, 1), out.stderr
    by_git = set(out.stdout.splitlines())
    for rel in rels:
        parts = rel.split("/")
        ours = any(match_ignore_style(pattern, "/".join(parts[:k])) for k in range(1, len(parts) + 1))
        assert ours == (rel in by_git), (pattern, rel)
