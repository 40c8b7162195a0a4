"""NotebookEdit, the tool added through the registry alone (speculate/tools/notebook.py + one line in
speculate/tools/registry.py): its edits and texts as Claude Code 2.1.332's tool of that name makes them
(observed with the real CLI, docs/claude-code.md "NotebookEdit"), and every capability the rest of speculate
reads from its declaration: the permission gate (Edit(path) rules, acceptEdits, plan), a fork's boundary,
the PostToolUse hook's tool_response (a real session on the simulator), the REPL's rendering, scenarios."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.agent_types import BoundaryReached
from speculate.permissions import PermissionGate
from speculate.tools import registry, tools_by_name
from speculate.tools.base import ToolContext, ToolResult

Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]  # the call fixture (conftest.py)

NB = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": 1,
            "id": "c1",
            "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["1\n"]}],
            "source": ["x = 1\n", "print(x)"],
        },
        {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title"]},
    ],
    "metadata": {"language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture
def nb(project: Path) -> Path:
    path = project / "nb.ipynb"
    path.write_text(json.dumps(NB, indent=1) + "\n")
    return path


def cells(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["cells"])


def test_replace_insert_delete_as_claude_code_does(ctx: ToolContext, call: Call, nb: Path) -> None:
    res = call("NotebookEdit", {"notebook_path": str(nb), "cell_id": "c1", "new_source": "y = 2"}, ctx)
    assert (res.content, res.is_error, res.written) == ("Updated cell c1 with y = 2", False, ("nb.ipynb",))
    # A replaced code cell loses its outputs and count; the source is written as one string.
    assert cells(nb)[0] == {
        "cell_type": "code",
        "execution_count": None,
        "id": "c1",
        "metadata": {},
        "outputs": [],
        "source": "y = 2",
    }
    # Claude Code writes JSON indented by one space, non-ASCII kept, with a final newline.
    assert nb.read_text() == json.dumps(json.loads(nb.read_text()), indent=1, ensure_ascii=False) + "\n"

    res = call(
        "NotebookEdit",
        {"notebook_path": "nb.ipynb", "cell_id": "c1", "new_source": "# é", "cell_type": "markdown",
         "edit_mode": "insert"},
        ctx,
    )  # fmt: skip
    new_id = str(res.content).removeprefix("Inserted cell ").removesuffix(" with # é")
    assert len(new_id) == 8 and int(new_id, 16) >= 0
    assert [c["id"] for c in cells(nb)] == ["c1", new_id, "m1"]
    assert cells(nb)[1] == {"cell_type": "markdown", "id": new_id, "source": "# é", "metadata": {}}
    assert "# é" in nb.read_text()

    res = call(
        "NotebookEdit",
        {"notebook_path": str(nb), "new_source": "first", "cell_type": "code", "edit_mode": "insert"},
        ctx,
    )
    first = cells(nb)[0]
    assert list(first) == ["cell_type", "id", "source", "metadata", "execution_count", "outputs"]
    assert res.content == f"Inserted cell {first['id']} with first"

    res = call(
        "NotebookEdit",
        {"notebook_path": str(nb), "cell_id": "m1", "new_source": "", "edit_mode": "delete"},
        ctx,
    )
    assert res.content == "Deleted cell m1" and [c["id"] for c in cells(nb)] == [first["id"], "c1", new_id]

    # cell-N: the N-th cell (from 0) when no cell has that id; a markdown cell keeps its type.
    res = call("NotebookEdit", {"notebook_path": str(nb), "cell_id": "cell-2", "new_source": "md"}, ctx)
    assert res.content == "Updated cell cell-2 with md"
    assert cells(nb)[2] == {"cell_type": "markdown", "id": new_id, "source": "md", "metadata": {}}


def test_refusals_in_claude_codes_words(ctx: ToolContext, call: Call, nb: Path, project: Path) -> None:
    before = nb.read_text()
    cases = {
        ("c1", "replace", None, "nb.ipynb"): "",
        ("zz", None, None, "nb.ipynb"): 'Cell with ID "zz" not found in notebook.',
        (None, None, None, "nb.ipynb"): "Cell ID must be specified when not inserting a new cell.",
        ("c1", "insert", None, "nb.ipynb"): "Cell type is required when using edit_mode=insert.",
        ("c1", None, None, "README.md"): "File must be a Jupyter notebook (.ipynb file). For editing other "
        "file types, use the Edit tool.",
        ("c1", None, None, "gone.ipynb"): f"Notebook file does not exist: {project}/gone.ipynb",
    }
    (project / "bad.ipynb").write_text("{not json")
    cases[("c1", None, None, "bad.ipynb")] = "Notebook is not valid JSON."
    for (cell_id, mode, cell_type, path), text in cases.items():
        if not text:
            continue
        raw = {"notebook_path": path, "new_source": "q", "cell_id": cell_id, "edit_mode": mode,
               "cell_type": cell_type}  # fmt: skip
        res = call("NotebookEdit", {k: v for k, v in raw.items() if v is not None}, ctx)
        assert (res.is_error, res.content) == (True, text)
    assert nb.read_text() == before
    res = call("NotebookEdit", {"notebook_path": "nb.ipynb", "new_source": "q", "edit_mode": "move"}, ctx)
    assert res.is_error and "edit_mode" in str(res.content)


def test_the_schema_is_claude_codes() -> None:
    """The input fields, required ones and enums of Claude Code 2.1.332's NotebookEdit (its request's tools,
    after ToolSearch loads it)."""
    schema = tools_by_name()["NotebookEdit"].schema()["input_schema"]
    assert set(schema["properties"]) == {"notebook_path", "cell_id", "new_source", "cell_type", "edit_mode"}
    assert schema["required"] == ["notebook_path", "new_source"]
    assert schema["additionalProperties"] is False

    def enum(field: str) -> list[str]:
        return next(s["enum"] for s in schema["properties"][field]["anyOf"] if "enum" in s)

    assert enum("cell_type") == ["code", "markdown"] and enum("edit_mode") == ["replace", "insert", "delete"]


def test_the_gate_reads_its_declaration(project: Path, nb: Path) -> None:
    tool = tools_by_name()["NotebookEdit"]
    inp = {"notebook_path": str(nb), "cell_id": "c1", "new_source": "q"}

    def decide(mode: str = "default", **rules: list[str]) -> str:
        return PermissionGate(mode=mode, root=project, **rules).check(tool, inp).behavior  # type: ignore[arg-type]

    # As observed in Claude Code 2.1.332: path Edit rules cover it, acceptEdits lets it through, plan and
    # default do not, a bare NotebookEdit allow allows it.
    assert decide() == "ask" and decide("plan") == "deny" and decide("acceptEdits") == "allow"
    assert decide(allow=["Edit(**)"]) == "allow" and decide(allow=["Edit(/nb.ipynb)"]) == "allow"
    assert decide(deny=["Edit(nb.ipynb)"]) == "deny" and decide(allow=["NotebookEdit"]) == "allow"
    assert decide(allow=["Edit(other/**)"]) == "ask"
    # speculate's own reading, towards refusing: a bare Edit or Read deny withholds every tool that edits.
    assert PermissionGate(deny=["Edit"]).withheld("NotebookEdit") is not None
    assert PermissionGate(deny=["Read"]).withheld("NotebookEdit") is not None
    # A sensitive file asks whatever the mode allows.
    (project / ".git").mkdir()
    git_inp = {**inp, "notebook_path": str(project / ".git" / "x.ipynb")}
    assert PermissionGate(mode="acceptEdits", root=project).check(tool, git_inp).behavior == "ask"


def test_a_fork_runs_it_and_stops_before_it_where_the_live_path_would_ask(project: Path, nb: Path) -> None:
    from speculate.speculation.authorize import SpecAuthorizer

    tool = tools_by_name()["NotebookEdit"]
    assert tool.name in registry.SPECULATIVE_TOOLS
    block = {"type": "tool_use", "id": "t1", "name": tool.name, "input": {}}

    def boundary(mode: str, path: str) -> str | None:
        fork = SpecAuthorizer(mode=mode, allow=[], deny=[], sandboxed_bash=False, root=project)  # type: ignore[arg-type]
        inp = tool.parse({"notebook_path": path, "cell_id": "c1", "new_source": "q"})
        try:
            trio.run(lambda: fork.authorize(tool, inp, block))
        except BoundaryReached as e:
            return e.kind
        return None

    assert boundary("acceptEdits", str(nb)) is None
    assert boundary("default", str(nb)) == "edit"
    assert boundary("acceptEdits", str(project / ".claude" / "n.ipynb")) == "protected"


def test_the_repl_shows_the_cell_change(project: Path, nb: Path) -> None:
    from speculate.agent_types import ToolFinished
    from speculate.repl.toolview import full_call, question_lines, tool_body

    inp = {"notebook_path": str(nb), "cell_id": "c1", "new_source": "y = 2\nz = 3"}
    ev = ToolFinished(
        "t", "NotebookEdit", "nb.ipynb", False, 0.0, "Updated cell c1 with y = 2\nz = 3", input=inp
    )
    assert [[t for _, t in line] for line in tool_body(ev).full] == [["+y = 2"], ["+z = 3"]]
    assert full_call("NotebookEdit", inp) == f'NotebookEdit({nb}, cell_id="c1")'
    shown = [
        "".join(t for _, t in line)
        for line in question_lines("NotebookEdit", inp, "NotebookEdit", lambda p: Path(p).read_text())
    ]
    assert '    -   "source": [' in shown and '    +   "source": "y = 2\\nz = 3"' in shown


SCENARIO = """
name: notebook
turns:
  - prompt: "edit the notebook"
    steps:
      - tools:
          - NotebookEdit: {notebook_path: "{root}/nb.ipynb", cell_id: "c1", new_source: "y = 2"}
      - tools:
          - NotebookEdit: {notebook_path: "{root}/nb.ipynb", new_source: "# new", cell_type: markdown, edit_mode: insert}
      - tools:
          - NotebookEdit: {notebook_path: "{root}/nb.ipynb", cell_id: "m1", new_source: "", edit_mode: delete}
      - text: "Edited."
    suggestion: null
"""


@pytest.mark.slow
def test_a_session_runs_it_and_hooks_get_claude_codes_tool_response(tmp_path: Path) -> None:
    """A scenario calls it on the simulator, in a real session, with a PostToolUse hook: the tool_response
    has the keys and values Claude Code 2.1.332 sent its hook for the same three calls."""
    from speculate.models.anthropic import AnthropicModel
    from speculate.session import SessionConfig, open_session
    from speculate.sim.scenario_yaml import parse_scenario
    from speculate.sim.server import SimServer

    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "nb.ipynb").write_text(json.dumps(NB, indent=1) + "\n")
    log = tmp_path / "hook.log"
    hook = {"type": "command", "command": f"printf '%s\\n' \"$(cat)\" >> {log}"}
    settings = {"hooks": {"PostToolUse": [{"matcher": "NotebookEdit", "hooks": [hook]}]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    events: list[Any] = []

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                config = SessionConfig(project=root, model=model, speculate=False, mode="acceptEdits")
                async with open_session(config, on_event=events.append) as s:
                    assert "NotebookEdit" in [t.name for t in s.tools]
                    await s.submit("edit the notebook")

    trio.run(main)
    got = [json.loads(line)["tool_response"] for line in log.read_text().splitlines()]
    assert [r["edit_mode"] for r in got] == ["replace", "insert", "delete"]
    path = f"{root.resolve()}/nb.ipynb"
    for r in got:
        assert r.pop("original_file").startswith("{") and r.pop("updated_file").endswith("}\n")
    replace, insert, delete = got
    assert replace == {"new_source": "y = 2", "old_source": "x = 1\nprint(x)", "cell_type": "code",
                       "language": "python", "edit_mode": "replace", "cell_id": "c1", "error": "",
                       "notebook_path": path}  # fmt: skip
    assert "old_source" not in insert and insert["cell_type"] == "markdown" and len(insert["cell_id"]) == 8
    # Claude Code says "code" for a deleted markdown cell when the call gave no cell_type.
    assert (delete["old_source"], delete["cell_type"], delete["cell_id"]) == ("# Title", "code", "m1")
    # Inserted without a cell_id: first.
    assert [c["cell_type"] for c in cells(root / "nb.ipynb")] == ["markdown", "code"]


def test_a_scenario_step_is_checked_against_its_input() -> None:
    from speculate.sim.scenario import ScenarioError
    from speculate.sim.scenario_yaml import parse_scenario

    assert parse_scenario(SCENARIO).turns[0].steps[0].tools[0].name == "NotebookEdit"
    with pytest.raises(ScenarioError, match="edit_mode"):
        parse_scenario(SCENARIO.replace("edit_mode: delete", "edit_mode: move"))


def test_an_imported_transcript_keeps_its_calls_inside_the_project() -> None:
    from speculate.importers.render import Rooter, scripted_call
    from speculate.importers.sessions import Counts, ToolUse

    counts = Counts()
    inp = {"notebook_path": "/w/p/nb.ipynb", "cell_id": "c1", "new_source": "y = 2"}
    got = scripted_call(ToolUse("t1", "NotebookEdit", inp), "/w/p", Rooter("/w/p"), counts)
    assert got == {"NotebookEdit": {**inp, "notebook_path": "{root}/nb.ipynb"}} and not counts
    outside = {**inp, "notebook_path": "/elsewhere/nb.ipynb"}
    assert scripted_call(ToolUse("t2", "NotebookEdit", outside), "/w/p", Rooter("/w/p"), counts) is None
    assert counts == {"writes outside the project (dropped)": 1}
