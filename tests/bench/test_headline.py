"""The README's headline numbers are the kept run's: the block equals what bench/headline/summary.json gives."""

from __future__ import annotations

import pytest

from bench import headline


def test_readme_headline_matches_the_kept_summary() -> None:
    if not (headline.HEADLINE_DIR / "summary.json").exists():
        pytest.skip("no kept headline run")
    kept = headline.load()
    assert headline.current_block(headline.README.read_text(encoding="utf-8")) == headline.readme_block(*kept)
