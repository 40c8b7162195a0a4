"""The permission corpus: a differential test of the live permission gate against Claude Code 2.1.332.

Several hundred tool calls (Bash command spellings, Read/Write/Edit inputs), grouped in *configurations*
(settings.json with allow/deny/ask rules, defaultMode, additionalDirectories and PreToolUse hooks; a
permission mode; extra project files; a trusted workspace or not), each configuration one scripted turn of
the embedded simulator. Every configuration runs twice, on identical scratch directories: under the real
``claude -p`` and under speculate's live loop (speculation off, every question answered "no"). Each call is
classified allow (it ran), ask or deny on both sides, and the final trees are compared.

- :mod:`.cases`: what a configuration and a call are, and their keys.
- :mod:`.corpus_shell`, :mod:`.corpus_files`: the tables the calls are generated from, by category;
  :mod:`.corpus` puts them together.
- :mod:`.layout`: a configuration's scratch directories (project, HOME, a sibling), its scenario, and the
  snapshot of what the calls changed.
- :mod:`.claude_side`, :mod:`.speculate_side`: one configuration under each agent, classified.
- :mod:`.compare`: per call same / stricter / looser, the trees, the report.
- :mod:`.differential`: ``python -m tests.permissions.differential [--json OUT] [--category C]``.

docs/claude-code.md, "The permission corpus", says how to run it and what the figures are.
"""
