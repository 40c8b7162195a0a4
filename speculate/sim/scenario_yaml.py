"""Scenario YAML: parse and validate a scenario file into :mod:`speculate.sim.scenario`'s types.

Validation walks YAML nodes, not plain data, so every error names the file, the line and the reason
(:mod:`speculate.sim.yaml_nodes`); the tools and intents a step may name are
:mod:`speculate.sim.scenario_tools`'.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from speculate import StrPath
from speculate.nesting import MAX_YAML_DEPTH, yaml_too_deep
from speculate.sim.scenario import (
    ACCEPTANCE,
    TOOL_CALL_MODES,
    Candidate,
    Expect,
    Scenario,
    ScenarioError,
    Step,
    ToolCall,
    Turn,
)
from speculate.sim.scenario_tools import INTENTS, MCP_PREFIX, OTHER_TOOLS, intent_fields, tool_inputs
from speculate.sim.yaml_nodes import NodeReader


class _Parser(NodeReader):
    def tool(self, node: yaml.Node, where: str) -> ToolCall:
        if not isinstance(node, yaml.MappingNode) or len(node.value) != 1:
            raise self.fail(node, f"{where} must be a one-key mapping like {{Read: {{file_path: ...}}}}")
        key, value = node.value[0]
        name = self.value(key)
        if name in INTENTS:
            return self.intent(name, value, where)
        if name in OTHER_TOOLS or name.startswith(MCP_PREFIX):
            if not isinstance(value, yaml.MappingNode):
                raise self.fail(value, f"{where} {name} input must be a mapping")
            return ToolCall(name=name, input={self.value(k): self.value(v) for k, v in value.value})
        if name not in tool_inputs():
            known = ", ".join([*INTENTS, *tool_inputs(), *OTHER_TOOLS])
            raise self.fail(key, f"{where}: unknown tool or intent {name!r} (known: {known})")
        fields = self.mapping(value, f"{where} {name} input", None)  # unknown keys: the Input model says
        return self.checked(name, fields, value, where)

    def intent(self, key: str, node: yaml.Node, where: str) -> ToolCall:
        """``read: {path: ...}`` and the like, as the equivalent call of speculate's own tools."""
        names = intent_fields(key)
        fields = self.mapping(node, f"{where} {key}", names)
        raw: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        values: dict[str, Any] = {}
        for field_name, (key_node, field_node) in fields.items():
            if field_name == "timeout_s":
                seconds = self.value(field_node)
                if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
                    raise self.fail(field_node, f"{where} {key}.timeout_s must be a positive number")
                values[names[field_name]] = round(seconds * 1000)
            raw[names[field_name]] = (key_node, field_node)
        return self.checked(INTENTS[key][0], raw, node, where, label=key, values=values)

    def checked(
        self,
        name: str,
        fields: dict[str, tuple[yaml.Node, yaml.Node]],
        node: yaml.Node,
        where: str,
        *,
        label: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> ToolCall:
        """Validate a call's input (tool field -> key and value nodes) with the tool's own Input model.

        Strict: YAML's ``'5'`` is no int and ``yes`` no string, so a scripted call is what a model sends. The
        input goes out as written, not as the model's dump (no defaults added). ``values`` stands in for a
        node's value (``timeout_s``, in milliseconds).
        """
        label = label or name
        shown = {v: k for k, v in intent_fields(label).items()} if label in INTENTS else {}
        shown |= {f: f"{shown.get(f, f)} (in ms)" for f in values or {}}
        inp = {f: self.value(v) for f, (_, v) in fields.items()} | (values or {})
        for field_name, value in inp.items():
            if value is None:  # the tool would take null for an optional field, but renderers treat it as set
                raise self.fail(fields[field_name][1], f"{where} {label}.{shown.get(field_name, field_name)} "
                                                       "is null: leave the field out instead")  # fmt: skip
        try:
            tool_inputs()[name].model_validate(inp, strict=True)
        except ValidationError as e:
            # One problem, at its field's line. An unknown key first: a misspelt field is also missing.
            err = min(e.errors(), key=lambda x: {"extra_forbidden": 0, "missing": 2}.get(x["type"], 1))
            field_name = str(err["loc"][0]) if err["loc"] else ""
            what = shown.get(field_name, field_name)
            if err["type"] == "missing":
                raise self.fail(node, f"{where} {label} input is missing required field {what!r}") from None
            if field_name not in fields:  # a model-level check
                raise self.fail(node, f"{where} {label} input: {err['msg']}") from None
            key_node, value_node = fields[field_name]
            if err["type"] == "extra_forbidden":
                allowed = ", ".join(tool_inputs()[name].model_fields)
                reason = f"unknown key {what!r} in {where} {label} input (allowed: {allowed})"
                raise self.fail(key_node, reason) from None
            raise self.fail(
                value_node, f"{where} {label}.{what}: {err['msg']}, got {err['input']!r}"
            ) from None
        return ToolCall(name=name, input=inp)

    def expect(self, kv: tuple[yaml.Node, yaml.Node], what: str) -> Expect:
        node = kv[1]
        f = self.mapping(node, f"{what}.expect", ("exit_code", "contains", "matches"))
        code = self.value(f["exit_code"][1]) if "exit_code" in f else None
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise self.fail(f["exit_code"][1], f"{what}.expect.exit_code must be an integer")
        contains = self.string(f["contains"][1], f"{what}.expect.contains") if "contains" in f else None
        matches = self.string(f["matches"][1], f"{what}.expect.matches") if "matches" in f else None
        if matches is not None:
            try:
                re.compile(matches)
            except re.error as e:
                raise self.fail(f["matches"][1], f"{what}.expect.matches is not a valid regex: {e}") from None
        if not f:
            raise self.fail(node, f"{what}.expect is empty (exit_code, contains or matches)")
        return Expect(exit_code=code, contains=contains, matches=matches)

    def steps(self, node: yaml.Node, where: str) -> tuple[Step, ...]:
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.fail(node, f"{where} must be a non-empty list of steps")
        out: list[Step] = []
        for i, step_node in enumerate(node.value):
            what = f"{where}[{i}]"
            fields = self.mapping(step_node, what, ("thinking", "text", "tools", "expect"))
            text = self.string(fields["text"][1], f"{what}.text") if "text" in fields else None
            thinking = None
            if "thinking" in fields:
                thinking = self.string(fields["thinking"][1], f"{what}.thinking")
            tools: tuple[ToolCall, ...] = ()
            if "tools" in fields:
                tools_node = fields["tools"][1]
                if not isinstance(tools_node, yaml.SequenceNode) or not tools_node.value:
                    raise self.fail(tools_node, f"{what}.tools must be a non-empty list")
                tools = tuple(self.tool(t, f"{what}.tools[{j}]") for j, t in enumerate(tools_node.value))
            if text is None and not tools:
                raise self.fail(step_node, f"{what} needs text, tools or both")
            last = i == len(node.value) - 1
            if last and tools:
                raise self.fail(
                    step_node, f"{what} is the last step but calls tools; the last step ends the turn"
                )
            if not last and not tools:
                raise self.fail(
                    step_node, f"{what} has no tools, so the turn would end before the steps after it"
                )
            expect: Expect | None = None
            expects: tuple[Expect | None, ...] = ()
            if "expect" in fields and not tools:
                raise self.fail(fields["expect"][0], f"{what}.expect needs tools whose results it checks")
            if "expect" in fields and isinstance(fields["expect"][1], yaml.SequenceNode):
                items = fields["expect"][1].value
                if len(items) != len(tools):
                    raise self.fail(
                        fields["expect"][1],
                        f"{what}.expect as a list needs one entry per tool ({len(tools)}), got {len(items)}",
                    )
                expects = tuple(
                    None
                    if isinstance(x, yaml.ScalarNode) and x.tag.endswith(":null")
                    else self.expect((fields["expect"][0], x), f"{what}.expect[{j}]")
                    for j, x in enumerate(items)
                )
            elif "expect" in fields:
                expect = self.expect(fields["expect"], what)
            out.append(Step(text=text, tools=tools, thinking=thinking, expect=expect, expects=expects))
        return tuple(out)

    def scenario(self, root: yaml.Node, base_dir: Path | None) -> Scenario:
        top = self.mapping(
            root,
            "scenario",
            ("name", "description", "workspace", "files", "turns", "tool_calls", "acceptance"),
        )
        acceptance = "scripted"
        if "acceptance" in top:
            acceptance = self.string(top["acceptance"][1], "acceptance") or ""
            if acceptance not in ACCEPTANCE:
                raise self.fail(
                    top["acceptance"][1],
                    f"acceptance must be one of {', '.join(ACCEPTANCE)}, got {acceptance!r}",
                )
        tool_calls = "api"
        if "tool_calls" in top:
            tool_calls = self.string(top["tool_calls"][1], "tool_calls") or ""
            if tool_calls not in TOOL_CALL_MODES:
                raise self.fail(
                    top["tool_calls"][1],
                    f"tool_calls must be one of {', '.join(TOOL_CALL_MODES)}, got {tool_calls!r}",
                )
        name = self.string(self.require(top, root, "scenario", "name"), "name")
        description = ""
        if "description" in top:
            description = self.string(top["description"][1], "description") or ""
        workspace: Path | None = None
        if "workspace" in top:
            ws_node = top["workspace"][1]
            ws_name = self.string(ws_node, "workspace")
            workspace = ((base_dir or Path.cwd()) / "workspaces" / str(ws_name)).resolve()
            if not workspace.is_dir():
                raise self.fail(ws_node, f"workspace {ws_name!r} not found: no directory {workspace}")
        files: dict[str, str] = {}
        if "files" in top:
            files_node = top["files"][1]
            if not isinstance(files_node, yaml.MappingNode):
                raise self.fail(files_node, "files must be a mapping of relative path -> content")
            for key, value in files_node.value:
                rel, content = self.value(key), self.value(value)
                if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in Path(rel).parts:
                    raise self.fail(key, f"files: {rel!r} must be a relative path inside the project")
                if not isinstance(content, str):
                    raise self.fail(value, f"files: content of {rel!r} must be a string")
                files[rel] = content
        turns_node = self.require(top, root, "scenario", "turns")
        if not isinstance(turns_node, yaml.SequenceNode) or not turns_node.value:
            raise self.fail(turns_node, "turns must be a non-empty list")
        raw: list[tuple[yaml.Node, dict[str, tuple[yaml.Node, yaml.Node]]]] = []
        for i, turn_node in enumerate(turns_node.value):
            raw.append(
                (
                    turn_node,
                    self.mapping(
                        turn_node,
                        f"turns[{i}]",
                        ("prompt", "pause_s", "steps", "suggestion", "suggestion_steps", "suggestions"),
                    ),
                )
            )
        prompts = [
            self.string(self.require(f, n, f"turns[{i}]", "prompt"), f"turns[{i}].prompt")
            for i, (n, f) in enumerate(raw)
        ]
        turns: list[Turn] = []
        for i, (turn_node, fields) in enumerate(raw):
            where = f"turns[{i}]"
            steps = self.steps(self.require(fields, turn_node, where, "steps"), f"{where}.steps")
            next_prompt = prompts[i + 1] if i + 1 < len(prompts) else None
            pause = _pause(self, fields, where, first=i == 0)
            if "suggestions" in fields:
                turns.append(
                    replace(
                        _candidates(self, fields, where, str(prompts[i]), steps, next_prompt), pause_s=pause
                    )
                )
                continue
            suggestion = None
            if "suggestion" in fields:
                suggestion = self.string(fields["suggestion"][1], f"{where}.suggestion", nullable=True)
            needs_steps = suggestion is not None and suggestion != next_prompt
            suggestion_steps = None
            if "suggestion_steps" in fields:
                if not needs_steps:
                    raise self.fail(
                        fields["suggestion_steps"][0],
                        f"{where}.suggestion_steps is unused: the suggestion is null or equals the next turn's prompt",
                    )
                suggestion_steps = self.steps(fields["suggestion_steps"][1], f"{where}.suggestion_steps")
            elif needs_steps:
                raise self.fail(
                    turn_node,
                    f"{where}.suggestion differs from the next turn's prompt, so suggestion_steps is required "
                    "(what the agent does if the suggestion is run)",
                )
            turns.append(
                Turn(
                    prompt=str(prompts[i]),
                    steps=steps,
                    suggestion=suggestion,
                    suggestion_steps=suggestion_steps,
                    pause_s=pause,
                )
            )
        return Scenario(
            name=str(name),
            description=description,
            workspace=workspace,
            files=files,
            turns=tuple(turns),
            source=self.source,
            tool_calls=tool_calls,
            acceptance=acceptance,
        )


def _pause(
    self: _Parser, fields: dict[str, tuple[yaml.Node, yaml.Node]], where: str, *, first: bool
) -> float | None:
    """``pause_s``: recorded seconds from the previous answer's end to this prompt (imported sessions)."""
    hit = fields.get("pause_s")
    if hit is None:
        return None
    value = self.value(hit[1])
    if first or isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise self.fail(
            hit[1], f"{where}.pause_s must be seconds >= 0, after an answer (not on the first turn)"
        )
    return float(value)


def _candidates(
    self: _Parser,
    fields: dict[str, tuple[yaml.Node, yaml.Node]],
    where: str,
    prompt: str,
    steps: tuple[Step, ...],
    next_prompt: str | None,
) -> Turn:
    """``suggestions: [{text, weight, steps}]``: weighted candidates, drawn per session from the seed."""
    for old in ("suggestion", "suggestion_steps"):
        if old in fields:
            raise self.fail(fields[old][0], f"{where}: use either suggestions or {old}, not both")
    node = fields["suggestions"][1]
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise self.fail(node, f"{where}.suggestions must be a non-empty list of {{text, weight, steps}}")
    out: list[Candidate] = []
    for j, item in enumerate(node.value):
        w = f"{where}.suggestions[{j}]"
        f = self.mapping(item, w, ("text", "weight", "steps"))
        text = self.string(self.require(f, item, w, "text"), f"{w}.text", nullable=True)
        weight = self.value(f["weight"][1]) if "weight" in f else 1.0
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight >= 0:
            raise self.fail(f["weight"][1] if "weight" in f else item, f"{w}.weight must be a number >= 0")
        needs = text is not None and text != next_prompt
        if weight == 0 and not needs:  # never drawn naturally: only the sweep's forced misses offer it
            raise self.fail(
                f["weight"][1],
                f"{w}.weight 0 is only for a wrong suggestion (one the acceptance "
                "sweep may offer as a miss); this one is null or the next prompt",
            )
        if "steps" in f and not needs:
            raise self.fail(f["steps"][0], f"{w}.steps is unused: the text is null or equals the next prompt")
        if needs and "steps" not in f:
            raise self.fail(
                item,
                f"{w}.text differs from the next turn's prompt, so steps is required "
                "(what the agent does if the suggestion is run)",
            )
        out.append(Candidate(text, float(weight), self.steps(f["steps"][1], f"{w}.steps") if needs else None))
    if len({c.text for c in out}) != len(out):
        raise self.fail(node, f"{where}.suggestions: two candidates have the same text")
    if not any(c.weight > 0 for c in out):
        raise self.fail(node, f"{where}.suggestions: every weight is 0; at least one must be drawn naturally")
    top = max(out, key=lambda c: c.weight)
    return Turn(
        prompt=prompt, steps=steps, suggestion=top.text, suggestion_steps=top.steps, candidates=tuple(out)
    )


def parse_scenario(text: str, *, source: str = "<string>", base_dir: StrPath | None = None) -> Scenario:
    """Parse and validate scenario YAML; ``base_dir`` is where ``workspaces/`` is looked up."""
    if (line := yaml_too_deep(text)) is not None:  # the loader recurses per level
        raise ScenarioError(source, line, f"nested more than {MAX_YAML_DEPTH} levels deep; not read")
    loader = yaml.SafeLoader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            lines = text.splitlines()
            line = mark.line + 1 if mark is not None else 1
            reason = f"YAML syntax error: {exc.problem or exc.context}"
            block = _open_block_scalar(lines[:line])
            if block is not None:  # the usual cause: a line of a | or > text less indented than its first
                reason += (
                    f" (probably the text block opened on line {block}: every line of a | or > block "
                    "must be indented at least as far as its first line)"
                )
            raise ScenarioError(source, line, reason) from None
        if root is None:
            raise ScenarioError(source, 1, "file is empty")
        return _Parser(source, loader).scenario(root, Path(base_dir) if base_dir is not None else None)
    finally:
        loader.dispose()


def _open_block_scalar(lines: list[str]) -> int | None:
    """The line (1-based) of the last ``key: |`` / ``key: >`` before the error, if one is still open."""
    for i in range(len(lines) - 1, -1, -1):
        if re.search(r":\s*[|>][-+0-9]*\s*(#.*)?$", lines[i]):
            return i + 1
        if lines[i].strip() and not lines[i].startswith(" "):
            return None
    return None


def load_scenario(path: StrPath) -> Scenario:
    """Load one scenario file, raising :class:`ScenarioError` (file, line, reason) if it is malformed."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(p), 0, f"cannot read scenario file: {exc}") from exc
    return parse_scenario(text, source=str(p), base_dir=p.parent)
