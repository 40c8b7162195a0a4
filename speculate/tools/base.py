"""The tool contract: a pydantic input model, read-only / concurrency-safe flags, an async ``call``, and the
capabilities the permission gate, the speculation engine, the hooks and the REPL ask of it.

A tool failure the model should see (bad input, file not found, not unique) is raised as
:class:`ToolError` and becomes an ``is_error`` tool_result; any other exception is our bug and propagates.

File I/O never runs on the trio loop that the main agent, the fork and the REPL share: a file tool's body is
a plain function run by :func:`run_io` in a worker thread, cancellable between files (:func:`between_files`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import trio
from pydantic import BaseModel, ValidationError

from speculate import FileSystem, Shell
from speculate.errors import InternalError, SpeculateError

T = TypeVar("T")
# The benchmark's "before" (bench/micro/loop_bench.py): run file-tool I/O inline on the trio loop, as it was.
INLINE_IO = False


async def run_io(fn: Callable[..., T], *args: Any) -> T:
    """Run a file tool's blocking body in a worker thread (inline when INLINE_IO). Cancelling the caller
    takes effect at the body's next :func:`between_files`; the thread never outlives the call."""
    if INLINE_IO:
        return fn(*args)
    return await trio.to_thread.run_sync(fn, *args)


PAUSE_EVERY, PAUSE_S = 8, 0.0002
_files_since_pause = 0


def between_files() -> None:
    """In a file tool's body, between two files: raise trio.Cancelled if the call was cancelled."""
    global _files_since_pause
    if not INLINE_IO:
        trio.from_thread.check_cancelled()
        _files_since_pause += 1
        if _files_since_pause >= PAUSE_EVERY:
            # Really let go of the GIL for a moment (sleep(0) is often won back at once): the loop thread,
            # waiting on it, streams the main answer.
            _files_since_pause = 0
            time.sleep(PAUSE_S)


class ToolError(SpeculateError):
    """A failure reported back to the model as an ``is_error`` tool_result (message = its content)."""


@dataclass(frozen=True)
class ToolResult:
    content: str | list[dict[str, Any]]  # a list: text and image blocks (MCP tools)
    is_error: bool = False
    # Paths (project-relative) the call wrote; the speculation engine counts them.
    written: tuple[str, ...] = ()


@dataclass
class ShellDir:
    """The Bash tool's current directory in one session (or fork)."""

    # Where the next command starts (physical, as ``pwd -P`` prints it); None: the project root.
    path: Path | None = None
    # Directories besides the project where it may stay (the permission gate's additional working
    # directories): a command that ends anywhere else resets it to the project root.
    working_dirs: tuple[Path, ...] = ()

    def copy(self) -> ShellDir:
        return ShellDir(self.path, self.working_dirs)


@dataclass
class ToolContext:
    fs: FileSystem
    shell: Shell
    # Where outputs over a tool's size limit are saved (outside the project tree).
    spill_dir: Path
    # Extra per-run data (e.g. the speculation engine marks forks here).
    extra: dict[str, Any] = field(default_factory=dict)
    # Project-relative paths Glob and Grep leave out of their results (files a Read deny rule covers, as
    # Claude Code does); the agent fills it from its permission gate when it is None.
    hidden: Callable[[str], bool] | None = None
    # Where the Bash tool's commands run: one object for the session, shared by the copies of this context
    # (the agent's), and a fork's own.
    shell_dir: ShellDir = field(default_factory=ShellDir)

    @property
    def cwd(self) -> Path:
        """The Bash tool's current directory, an absolute path: a ``cd`` persists from call to call in one
        session, as in Claude Code (:mod:`speculate.tools.bash`). The permission gate is given it."""
        return self.shell_dir.path if self.shell_dir.path is not None else Path(self.fs.root)


Shown = Literal["output", "diff", "count"]


class Tool(ABC):
    # Class attributes of the built-in tools; an MCP tool (or a name the model made up) sets its own.
    name: str
    description: str
    Input: ClassVar[type[BaseModel]]
    max_result_chars: ClassVar[int] = 30_000

    # -- capabilities: what the rest of speculate asks of a tool, through speculate.tools.registry (the one
    # place that turns them into sets of names; no module compares tool names, tests/test_tool_names.py).
    # The input field naming the file (or, with ``searches_directory``, the directory) the call acts on:
    # path permission rules match it, a fork checks it against protected paths, hooks read that file.
    path_field: ClassVar[str | None] = None
    searches_directory: ClassVar[bool] = False  # its path names a directory to search (omitted: the project)
    # It changes the file at ``path_field``: the edit permission (acceptEdits lets it through, sensitive files
    # ask), a Read deny rule refuses it, a fork stops before it where the live path would ask.
    writes_files: ClassVar[bool] = False
    # Its input's ``command`` runs in a shell: permission rules match the command (speculate.permission_bash),
    # a fork runs it in the sandbox, ``always`` allows that command only.
    runs_commands: ClassVar[bool] = False
    # The permission-rule name that also covers it (Claude Code: ``Edit(path)`` rules cover every tool that
    # edits files, ``Read`` rules every tool that reads them); None: rules naming the tool itself only.
    rule_family: ClassVar[str | None] = None
    # A speculative fork may run it before the user accepts (its effects stay in the fork's overlay, its
    # permission is decided as the live path would).
    speculative: ClassVar[bool] = False
    # How the REPL shows a finished call (speculate.repl.toolview): its first output lines, the change it
    # made as a diff (``change_lines``), or a count of the lines it read.
    shown_as: ClassVar[Shown] = "output"
    # Input fields a "diff" tool's permission question shows as the diff, not as arguments.
    diff_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def hook_response(
        cls, inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
    ) -> Any:
        """The PostToolUse hook's ``tool_response`` for a successful call, in Claude Code's shape for this
        tool: rebuilt from the input, the result's ``content`` and, for a tool with a file ``path_field``, the
        file's text ``before`` (a writing tool) and ``after`` the call. Default: the content as the model
        saw it (what Claude Code gives for an MCP tool)."""
        return content

    @classmethod
    def edited(cls, inp: dict[str, Any], current: str | None) -> str | None:
        """A writing tool: the file's text after this call given its text now (None: absent), or None when
        it cannot be told. The REPL's permission question shows the diff."""
        return None

    @classmethod
    def change_lines(cls, inp: dict[str, Any]) -> list[str]:
        """A writing tool: what the call changed, as diff lines from its input alone (after the call the old
        text is gone). The REPL shows them under the call."""
        return []

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

    def wrong_input(self, inp: BaseModel) -> InternalError:
        """For a call given another model than its own ``Input``: ``parse`` makes that, so this is our bug."""
        return InternalError(
            f"the {self.name} tool was called with a {type(inp).__name__}, not its {self.Input.__name__}"
        )

    @abstractmethod
    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult: ...
