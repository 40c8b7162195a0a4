"""The fixed texts the agent sends: the system prompt and the suggestion instruction.

The simulator recognises a suggestion request by :data:`SUGGESTION_MARKER` at the start of the last user
message, and finds the project root from the ``Working directory:`` line of the system prompt.
"""

from __future__ import annotations

from pathlib import Path

SYSTEM_TEMPLATE = """You are a coding agent working in a software project on the user's machine.
Use the tools to read, search, edit and run code. Keep answers short and concrete.
Working directory: {root}
"""

SUGGESTION_MARKER = "[SUGGESTION MODE]"

SUGGESTION_INSTRUCTION = (
    SUGGESTION_MARKER
    + " Predict what the user will most naturally type next in this session, as they would type it: "
    "2 to 12 words, no quotes, no explanation. If nothing obvious follows, answer with nothing. "
    "Do not call any tools."
)


def system_prompt(root: Path) -> str:
    return SYSTEM_TEMPLATE.format(root=root)
