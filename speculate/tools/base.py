"""The tool contract: a pydantic input model, read-only / concurrency-safe flags, an async ``call``.

A tool failure the model should see (bad input, file not found, not unique) is raised as
:class:`ToolError` and becomes an ``is_error`` tool_result; any other exception is our bug and propagates.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from speculate import FileSystem, Shell


class ToolError(Exception):
    """A failure reported back to the model as an ``is_error`` tool_result (message = its content)."""


@dataclass(frozen=True)
class ToolResult:
    content: str | list[dict[str, Any]]  # a list: text and image blocks (MCP tools)
    is_error: bool = False
    # Paths (project-relative) the call wrote; the speculation engine counts them.
    written: tuple[str, ...] = ()


@dataclass
class ToolContext:
    fs: FileSystem
    shell: Shell
    # Where outputs over a tool's size limit are saved (outside the project tree).
    spill_dir: Path
    # Extra per-run data (e.g. the speculation engine marks forks here).
    extra: dict[str, Any] = field(default_factory=dict)


class Tool(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    max_result_chars: ClassVar[int] = 30_000

    def is_read_only(self, inp: BaseModel) -> bool:
        return False

    def is_concurrency_safe(self, inp: BaseModel) -> bool:
        return self.is_read_only(inp)

    def schema(self) -> dict[str, Any]:
        """The tool definition sent in the request's ``tools`` array (stable order of keys)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.Input.model_json_schema(),
        }

    def parse(self, raw: Any) -> BaseModel:
        """Validate raw tool input; invalid input becomes a ToolError naming the problem."""
        try:
            return self.Input.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or 'input'}: {err['msg']}" for err in e.errors()
            )
            raise ToolError(f"Invalid input for {self.name}: {problems}") from None

    @abstractmethod
    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult: ...
