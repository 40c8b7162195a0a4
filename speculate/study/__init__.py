"""An in-situ randomized study in the REPL (``speculate repl --study DIR``, issue #25 part 2).

Each turn is assigned at random (seeded, logged) to an arm that decides what Tab gives: the speculation's
answer (``speculative``), a normal turn for the suggested prompt (``suggest``), or, only when asked for, no
ghost text at all (``plain``, which changes what the person does and is labelled so). What this package owns:

- :mod:`.arms`: the arms, the seeded assignment and what each arm switches in the session;
- :mod:`.classify`: taken as-is, edited or ignored, and the suggestion's length bucket and first word;
- :mod:`.records`: the JSONL records one study session writes (one schema for writing and reading);
- :mod:`.recorder`: the per-turn state machine that times a turn and writes its record;
- :mod:`.consent`: the consent line and the explicit yes stored in the study directory;
- :mod:`.report` and :mod:`.cli`: ``speculate study report DIR…``, pooled over users and sessions.

Nothing here imports the benchmark; the report's statistics are :mod:`speculate.statistics`.
See docs/study.md.
"""
