"""Importers: sessions recorded by other coding agents, turned into scenarios (docs/transcripts.md).

Owns finding and reading Claude Code's session transcripts, skipping and listing what cannot be read
(:mod:`.files`, :mod:`.records`), finding the conversation's turns in them (:mod:`.sessions`),
reconstructing the project's starting tree (:mod:`.tree`), writing the turns as scenario YAML with checkable
expectations (:mod:`.render`, :mod:`.checks`), redacting them (:mod:`.redact`) and the ``speculate import``
command (:mod:`.claude_code`). Nothing here runs a tool or talks to a model: an import only reads what the
transcript already holds (and, when asked, a git revision of the user's repository).
"""
