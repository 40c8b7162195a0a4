"""Running one speculative fork: its bounded overlay, its sandboxed shell (or none), the user's hooks in
it, its authorizer (the live gate, asking nothing until acceptance) and its agent; what it shows and
spends as it goes; and, when it completes, the pipelined next suggestion. The engine
(:mod:`speculate.speculation.engine`) decides which forks run and what becomes of them."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import trio

from speculate.agent import Agent
from speculate.agent_types import (
    AgentEvent,
    BoundaryReached,
    MaxTurnsReached,
    ResponseDone,
    ToolFinished,
    ToolStarted,
)
from speculate.hooks import PromptBlocked
from speculate.models.base import ModelError
from speculate.models.billing import billed_to
from speculate.speculation import suggest
from speculate.speculation.approvals import Approvals
from speculate.speculation.authorize import SpecAuthorizer
from speculate.speculation.effects import renames
from speculate.speculation.fork import Speculation
from speculate.speculation.fork_fs import BoundedWrites, fork_overlay
from speculate.speculation.guard import Protection
from speculate.speculation.host import Host, TurnState
from speculate.speculation.topk import ForkSet
from speculate.tools.base import ToolContext

EmitFn = Callable[..., None]  # (spec, state, suggestion, **detail): the engine shows the lowest-ranked fork


class ForkRunner:
    def __init__(
        self, *, session: Host, forks: ForkSet, emit: EmitFn, k: int = 1, defer_edits: bool = False
    ) -> None:
        self.s = session
        self.k = k  # candidates asked of the pipelined suggestion
        self.defer_edits = defer_edits  # the session's spec_edits is "ask" (policy.Options.edits)
        self.forks = forks
        self.emit = emit
        self.bash_line = ""  # how speculative Bash runs here (or why it does not), set by the first fork

    async def run(self, state: TurnState, spec: Speculation) -> None:
        """Fork on a fresh overlay from the turn ``state`` left, run the candidate to completion or a
        boundary, then (complete) generate the pipelined next suggestion on its messages."""
        text = spec.suggestion
        t = time.perf_counter()
        # Bounded: its Bash commands and its file tools write the same upper layer, on a filesystem of the
        # sandbox's size (a write past it fails, and the fork stops at `resource`).
        spec.overlay = fork_overlay(self.s.project, self.s.cfg.sandbox_limits)
        spec.record.overlay_create_s = time.perf_counter() - t
        protection = Protection(self.s.workspace.settings.protected_paths)
        shell, sandboxed, backend = self._shell_for(spec.overlay, protection)
        spec.record.overlay_backend = backend
        spec.record.bash = self.bash_line
        # The user's hooks are untrusted code with side effects, as Bash is: in the sandbox against the
        # overlay, or (no sandbox) a boundary wherever one would run.
        hooks = self.s.workspace.hooks(
            shell=shell,
            session_id=self.s.session_id,
            mode=lambda: self.s.cfg.mode,
            sandboxed=sandboxed,
            boundary=None
            if sandboxed
            else f"hooks run in a speculation only in its sandbox: {self.bash_line}",
            on_event=spec.hook_ran,
            transcript=self.s.hook_transcript.fork() if self.s.hook_transcript is not None else None,
        )
        spec.approvals = Approvals(spec.overlay)
        authorizer = spec.authorizer = SpecAuthorizer(
            mode=self.s.cfg.mode,
            allow=self.s.authorizer.allow,
            deny=self.s.authorizer.deny,
            ask_rules=self.s.authorizer.ask_rules,
            additional_dirs=self.s.authorizer.additional_dirs,
            sandboxed_bash=sandboxed,
            root=self.s.project,
            bash_off=self.bash_line,
            hook_stop=hooks.stops_call,
            protection=protection,
            fs=spec.overlay,
            approvals=spec.approvals,
            defer_edits=self.defer_edits,
        )
        # Its Bash commands start where the session's would (the sandbox mounts the view at the project's
        # own path, so that directory is the same path in it), and its own `cd`s carry on from there.
        ctx = ToolContext(
            fs=BoundedWrites(spec.overlay),
            shell=shell,
            spill_dir=self.s.spill_dir,
            shell_dir=state.shell_dir.copy(),
        )
        authorizer.ctx = ctx
        spec.agent = Agent(
            model=self.s.cfg.model,
            key=state.key,
            tools=self.s.tools,
            ctx=ctx,
            authorizer=authorizer,
            messages=copy.deepcopy(state.messages),
            max_turns=self.s.cfg.spec_max_turns,
            max_messages=self.s.cfg.spec_max_messages,
            on_event=lambda e: self.on_event(spec, e),
            repair_on_interrupt=False,
            hooks=hooks,
        )
        spec.record.fork_start_s = time.perf_counter() - spec.started
        self.emit(spec, "speculating", text, tools_run=0, elapsed_s=0.0)
        try:
            with billed_to(spec.meter):
                await spec.agent.run(text)
            spec.stop("complete")
        except BoundaryReached as b:
            spec.stop(b.kind, b.detail)
            # Over its bounds, or holding what made the boundary (a protected path or special file written by
            # a command, a hook that failed): nothing of it may be promoted; the disk is freed at once.
            if b.kind == "resource" or b.discard:
                spec.overlay.discard()
                spec.overlay = None
        except PromptBlocked as e:  # as in the main loop, the prompt is refused; accepting runs it normally
            spec.stop("hook", f"UserPromptSubmit hook refused it: {e}")
        except MaxTurnsReached as e:
            spec.stop(e.kind, str(e))
        except ModelError as e:
            spec.stop("error", str(e))
        if spec.overlay is not None and len(spec.agent.messages) == spec.prefix_len:
            spec.overlay.discard()  # stopped before its prompt was added: nothing to promote or inject
            spec.overlay = None
        spec.finished_at = time.perf_counter()
        spec.record.completed = True
        if (
            spec.overlay is not None
        ):  # renames need the real tree before promotion: learn them now, not on Tab
            ov = spec.overlay
            with trio.CancelScope(shield=True):  # short; and what follows must run
                spec.renames = await trio.to_thread.run_sync(
                    lambda: renames(ov.changes(), ov.lower, ov.upper)
                )
        spec.finished.set()
        approvals = len(spec.approvals.pending) if spec.overlay is not None else 0
        if spec.complete:
            self.emit(
                spec,
                "ready",
                text,
                tools_run=spec.tools_run,
                elapsed_s=spec.finished_at - spec.started,
                approvals=approvals,
            )
            try:
                with billed_to(spec.next_meter):
                    spec.next = await suggest.generate(
                        self.s.cfg.model, spec.agent.key, spec.agent.messages, k=self.k
                    )
            except ModelError:
                spec.next = None
            finally:
                spec.next_ready.set()
        else:
            spec.next_ready.set()
            self.emit(
                spec,
                "boundary",
                text,
                boundary=spec.record.boundary,
                detail=spec.record.boundary_detail,
                tools_run=spec.tools_run,
                elapsed_s=spec.finished_at - spec.started,
                approvals=approvals,
            )

    def _shell_for(self, overlay: Any, protection: Protection) -> tuple[Any, bool, str]:
        from speculate.speculation.sandbox_shell import NoShell, SandboxShell, bash_sandbox

        box = bash_sandbox(self.s.cfg.overlay_backend)
        self.bash_line = box.line
        if box.backend is None:
            return NoShell(box.line), False, "pure"
        shell = SandboxShell(
            overlay,
            box.backend,
            limits=self.s.cfg.sandbox_limits,
            protection=protection,
            env=self.s.cfg.tool_env,
            passed_env=self.s.workspace.settings.env,
        )
        return self.forks.wrap_shell(shell), True, box.backend

    def on_event(self, spec: Speculation, e: AgentEvent) -> None:
        if not isinstance(e, ToolStarted):
            spec.shown.append(e)
            if spec.live is not None:
                spec.live(e)
        if isinstance(e, ResponseDone):
            spec.usage = spec.usage.add(e.response.usage)
            spec.last_usage = e.response.usage
            spec.requests += 1
            if (over := self.forks.over_budget()) is not None:  # top-K's shared budget: stop the lowest rank
                over.stop("budget", f"the forks' token budget ({self.forks.token_budget}) is spent")
                over.scope.cancel()
        elif isinstance(e, ToolFinished):
            if spec.approvals is not None and spec.overlay is not None:
                spec.approvals.finish(e.id)
            spec.tools_run += 1
            self.emit(
                spec,
                "speculating",
                spec.suggestion,
                tools_run=spec.tools_run,
                elapsed_s=time.perf_counter() - spec.started,
            )
