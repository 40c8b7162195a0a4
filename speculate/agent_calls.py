"""One tool call of the agent loop: whether it may start early (while the response still streams) or run
in a concurrent batch, its authorization (the PreToolUse hooks, then the authorizer, as in Claude Code),
running it with its PostToolUse hooks, and the ``is_error`` result of one refused.
:class:`~speculate.agent.Agent` is one of these."""

from __future__ import annotations

import time
from collections.abc import Callable

import trio
from pydantic import BaseModel

from speculate.agent_types import (
    AgentEvent,
    Authorizer,
    BoundaryReached,
    Hooks,
    ToolDenied,
    ToolFinished,
    ToolStarted,
    summarize,
)
from speculate.hooks.runner import elapsed_ms
from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult
from speculate.types import Block, text_of_result, tool_result


class AgentCalls:
    """The tool-call side of an agent; :class:`~speculate.agent.Agent` sets these in its ``__init__``."""

    tools: dict[str, Tool]
    ctx: ToolContext
    authorizer: Authorizer
    hooks: Hooks | None
    on_event: Callable[[AgentEvent], None]
    _inputs: dict[str, Block]
    _notes: dict[str, list[str]]
    _stop: str | None

    def _safe(self, block: Block) -> bool:
        tool = self.tools.get(block["name"])
        if tool is None:
            return False
        try:
            return tool.is_concurrency_safe(tool.parse(block["input"]))
        except ToolError:
            return False

    def _can_start_early(self, block: Block) -> bool:
        tool = self.tools.get(block["name"])
        if tool is None:
            return False
        try:
            inp = tool.parse(block["input"])
        except ToolError:
            return False
        if self.hooks is not None and self.hooks.would_run("PreToolUse", tool.name):
            return False  # its hooks decide first, in call order (execute)
        return tool.is_concurrency_safe(inp) and self.authorizer.preauthorized(tool, inp)

    async def _authorize(self, block: Block, done: dict[str, Block]) -> None:
        tool = self.tools.get(block["name"])
        if tool is None:
            try:  # a fork's authorizer turns this into a denied_tool boundary
                await self.authorizer.authorize(_UnknownTool(block["name"]), _Empty(), block)
            except ToolDenied:
                pass
            self._refuse(block, done, f"No such tool: {block['name']}")
            return
        try:
            inp = tool.parse(block["input"])
            await self.authorizer.before_hooks(tool, inp, block)
            if self.hooks is None:
                await self.authorizer.authorize(tool, inp, block)
                return
            pre = await self.hooks.pre_tool(block)
            self._notes[block["id"]] = list(pre.context)
            self._stop = self._stop or pre.stop
            if pre.refusal is not None:
                self._refuse(block, done, pre.refusal)
                return
            run = block
            if pre.updated_input is not None:  # the changed input is what is gated and run
                run = self._inputs[block["id"]] = {**block, "input": pre.updated_input}
                try:
                    inp = tool.parse(pre.updated_input)
                except ToolError as e:
                    raise ToolError(
                        f"PreToolUse hook for {tool.name} returned updatedInput that is not valid "
                        f"for the tool: {e}"
                    ) from None
                await self.authorizer.before_hooks(tool, inp, run)
            hook = pre.decision if pre.decision in ("allow", "ask") else None
            await self.authorizer.authorize(tool, inp, run, hook=hook, hook_reason=pre.reason)
        except ToolError as e:
            self._refuse(block, done, str(e))
        except ToolDenied as e:
            self._refuse(block, done, f"Permission denied: {e}")

    def _refuse(self, block: Block, done: dict[str, Block], why: str) -> None:
        """A call that does not run: an is_error result for the model, and a line for the person."""
        done[block["id"]] = tool_result(block["id"], why, is_error=True)
        self.on_event(
            ToolFinished(
                block["id"],
                block["name"],
                summarize(block["name"], block.get("input", {})),
                True,
                0.0,
                why,
                denied=True,
                input=block.get("input", {}),
            )
        )

    async def _run_one_into(self, block: Block, done: dict[str, Block], ev: trio.Event | None) -> None:
        try:
            done[block["id"]] = await self._run_one(block)
        finally:
            if ev is not None:
                ev.set()

    async def _run_one(self, block: Block) -> Block:
        tool = self.tools[block["name"]]
        summary = summarize(block["name"], block.get("input", {}))
        self.on_event(ToolStarted(block["id"], block["name"], summary))
        t0 = time.perf_counter()
        run = self._inputs.get(block["id"], block)
        try:
            before = await self.hooks.capture(run, self.ctx.fs) if self.hooks is not None else None
            res = await self._call(tool, run)
            out = tool_result(block["id"], res.content, is_error=res.is_error)
            if self.hooks is not None:
                ms = elapsed_ms(t0)
                post = await (
                    self.hooks.post_tool_failure(run, out, duration_ms=ms)
                    if res.is_error
                    else self.hooks.post_tool(run, out, fs=self.ctx.fs, before=before, duration_ms=ms)
                )
                self._notes.setdefault(block["id"], []).extend(post.context)
                self._stop = self._stop or post.stop
        except (
            BoundaryReached
        ) as b:  # a sandbox bound crossed or its backend died; a hook the fork cannot run
            b.tool_use_id = b.tool_use_id or block["id"]
            raise
        self.on_event(
            ToolFinished(
                block["id"],
                block["name"],
                summary,
                res.is_error,
                time.perf_counter() - t0,
                text_of_result(out["content"]),
                input=block.get("input", {}),
            )
        )
        if res.written:
            out["_written"] = res.written
        return out

    async def _call(self, tool: Tool, block: Block) -> ToolResult:
        try:
            return await tool.call(tool.parse(block["input"]), self.ctx)
        except ToolError as e:
            return ToolResult(str(e), is_error=True)
        except OSError as e:  # a filesystem answer (not found, is a directory, escape): the model's to see
            return ToolResult(f"{type(e).__name__}: {e}", is_error=True)


class _Empty(BaseModel):
    pass


class _UnknownTool(Tool):
    description = "a tool the model named that does not exist"
    Input = _Empty

    def __init__(self, name: str) -> None:
        self.name = name

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:  # pragma: no cover
        raise ToolError(f"No such tool: {self.name}")
