"""Instructions as Claude Code 2.1.332 loads them (each case observed with the CLI against the simulator; the
commands are in docs/claude-code.md, "Instructions"): rules files, path-scoped rules attached after a Read,
CLAUDE.md files above the git root, HTML comments, import punctuation and ``claudeMdExcludes``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import trio

from speculate.instruction_markdown import front_matter, import_refs, rule_globs, strip_comments
from speculate.instruction_nested import nested_reminders
from speculate.instruction_rules import excluder, matches
from speculate.instructions import is_instructions_path, load_instructions, top_down
from speculate.models.anthropic import AnthropicModel
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.workspace import Workspace


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def paths(got: object) -> list[Path]:
    return [f.path for f in got.files]  # type: ignore[attr-defined]


def test_rules_load_after_each_directorys_claude_md_and_before_its_local_file(
    tmp_path: Path, _no_user_claude_dir: Path
) -> None:
    user = put(_no_user_claude_dir / "CLAUDE.md", "USER\n")
    user_rule = put(_no_user_claude_dir / "rules" / "u.md", "USER RULE\n")
    outer = tmp_path / "outer"
    repo = outer / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    outer_md = put(outer / "CLAUDE.md", "OUTER\n")
    outer_rule = put(outer / ".claude" / "rules" / "o.md", "OUTER RULE\n")
    root_md = put(repo / "CLAUDE.md", "ROOT\n")
    dot = put(repo / ".claude" / "CLAUDE.md", "DOT\n")
    rules = repo / ".claude" / "rules"
    for name in ("zeta.md", "alpha.md", "sub/nested.md", "mid.md"):
        put(rules / name, f"RULE {name}\n")
    put(rules / "notes.txt", "not a rule\n")
    local = put(repo / "CLAUDE.local.md", "LOCAL\n")
    got = load_instructions(repo)
    # Claude Code lists a rules directory in the file system's order (readdir), descending where a
    # subdirectory is listed; not sorted.
    listed = [rules / n for n in os.listdir(rules) if n != "notes.txt"]
    expect_rules = [p for entry in listed for p in ([entry / "nested.md"] if entry.is_dir() else [entry])]
    assert paths(got) == [user, user_rule, outer_md, outer_rule, root_md, dot, *expect_rules, local]
    assert [f.scope for f in got.files][:3] == ["user", "user", "project"]
    assert "not a rule" not in got.render()


def test_claude_md_files_load_up_to_but_not_including_the_file_system_root(tmp_path: Path) -> None:
    put(tmp_path / "CLAUDE.md", "ABOVE\n")
    put(tmp_path / "a" / "b" / "CLAUDE.md", "HERE\n")
    assert [f.text for f in load_instructions(tmp_path / "a" / "b").files] == ["ABOVE\n", "HERE\n"]
    assert top_down(Path("/x/y")) == [Path("/x"), Path("/x/y")]  # never "/" (no /CLAUDE.md, no /.claude)


def test_front_matter_is_taken_off_and_scoped_rules_wait(tmp_path: Path) -> None:
    rules = tmp_path / ".claude" / "rules"
    put(tmp_path / "CLAUDE.md", "---\npaths: '*.nothing'\n---\n\n   ROOT with front matter\n")
    put(rules / "plain.md", "---\ndescription: d\n---\nPLAIN\n")
    put(rules / "scoped.md", "---\npaths:\n  - src/**/*.ts\n---\nTS RULE @../../imp.md\n")
    put(tmp_path / "imp.md", "IMPORTED BY A SCOPED RULE\n")  # loads at start: it has no scope of its own
    put(rules / "all.md", "---\npaths: '**'\n---\nALL\n")
    put(rules / "empty.md", "---\npaths: []\n---\nEMPTY\n")
    put(
        rules / "bad.md", "---\npaths: [unclosed\n---\nBAD YAML\n"
    )  # quoted and retried: scoped to "[unclosed"
    text = load_instructions(tmp_path).render()
    for kept in ("ROOT with front matter", "PLAIN", "ALL", "EMPTY", "IMPORTED BY A SCOPED RULE"):
        assert kept in text
    assert "TS RULE" not in text and "BAD YAML" not in text and "description" not in text
    assert "):\n\nROOT with front matter\n" in text  # the text is trimmed, as Claude Code's


def test_paths_front_matter_forms() -> None:
    def globs(yaml_text: str) -> tuple[str, ...] | None:
        return rule_globs(front_matter(f"---\n{yaml_text}\n---\nbody\n")[0])

    assert globs('paths: "a.txt, b.txt"') == ("a.txt", "b.txt")
    assert globs("paths: lib/*.{js,cjs}") == ("lib/*.js", "lib/*.cjs")
    assert globs("paths: **/*.ts") == ("**/*.ts",)  # not YAML as written: quoted and read again
    assert globs("paths:\n  - src/**\n  - 7") == ("src",)  # a trailing /** goes; a number is no pattern
    assert globs("paths: '**'") is None and globs("paths: []") is None and globs("paths: 5") is None
    assert front_matter("no front matter\n---\n") == ({}, "no front matter\n---\n")


@pytest.mark.parametrize(
    ("glob", "rel", "hit"),
    [
        ("*.py", "tool.py", True),
        ("*.py", "a/b/tool.py", True),  # no slash: any depth
        ("src", "src/a.ts", True),  # a directory covers its files
        ("src/*.ts", "src/a.ts", True),
        ("src/*.ts", "x/src/a.ts", False),  # a slash anchors it
        ("/lib/x.js", "lib/x.js", True),
        ("LIB/X.JS", "lib/x.js", True),  # case ignored
        ("src/*.ts", "../src/a.ts", False),  # outside the rule's directory
    ],
)
def test_paths_match_as_gitignore_lines(glob: str, rel: str, hit: bool) -> None:
    assert matches([glob], rel) is hit


def test_html_comments_as_claude_code_strips_them() -> None:
    text = (
        "P1\n\n<!-- alone -->\n\nP3\n<!-- col 0 after a paragraph -->\n\n"
        "P4\n  <!-- indented in a paragraph: kept -->\n\n   <!-- three spaces -->\n\n"
        "    <!-- four spaces: code -->\n\n- item\n  <!-- in a list: kept -->\n\n"
        "> <!-- in a quote: kept -->\n\n<!-- h -->\n\n\n\nAFTER\n\n<div>\n<!-- in html: kept -->\n</div>\n\n"
        "# H <!-- in a heading: kept -->\n\n<!-- k --> left over\n\n```\n<!-- in a fence: kept -->\n```\n"
        "`<!-- in a span -->`\n"
    )
    assert strip_comments(text) == (
        "P1\n\nP3\nP4\n  <!-- indented in a paragraph: kept -->\n\n"
        "    <!-- four spaces: code -->\n\n- item\n  <!-- in a list: kept -->\n\n"
        "> <!-- in a quote: kept -->\n\nAFTER\n\n<div>\n<!-- in html: kept -->\n</div>\n\n"
        "# H <!-- in a heading: kept -->\n\n left over\n\n```\n<!-- in a fence: kept -->\n```\n"
        "`<!-- in a span -->`\n"
    )
    # An unclosed comment keeps the rest of the file as it is.
    assert strip_comments("A\n\n<!-- open\nB\n") == "A\n\n<!-- open\nB\n"


def test_import_punctuation_is_part_of_the_path(tmp_path: Path) -> None:
    names = ["dot", "comma", "paren", "bang", "hash", "noext", "png", "lit"]
    for n in names:
        put(tmp_path / f"i-{n}.md", f"IMPORTED {n}\n")
    put(tmp_path / "i-noext", "IMPORTED noext-file\n")
    put(tmp_path / "i-png.png", "IMPORTED png-file\n")
    put(tmp_path / "i-lit.md,", "IMPORTED literal comma file\n")  # ".md," is not a text file's extension
    put(
        tmp_path / "CLAUDE.md",
        "@i-dot.md.\n\n@i-comma.md,\n\n@i-paren.md)\n\n@i-bang.md!\n\n@i-hash.md#part\n\n@i-noext\n\n"
        "@i-png.png\n\nsee @i-lit.md, here\n\n<!-- @i-dot.md -->\n",
    )
    got = load_instructions(tmp_path)
    assert [p.name for p in paths(got)] == ["CLAUDE.md", "i-hash.md", "i-noext"]
    assert import_refs("x `@a.md` @b.md#c <!-- @d.md --> \\@e.md")[:1] == ["b.md"]


def test_a_project_files_imports_stay_in_the_working_directory_not_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    put(repo / "CLAUDE.md", "ROOT @docs/x.md @sub/in.md\n")
    put(repo / "docs" / "x.md", "DOCS\n")
    put(repo / "sub" / "in.md", "IN\n")
    got = load_instructions(repo / "sub")
    assert [p.name for p in paths(got)] == ["CLAUDE.md", "in.md"]
    assert got.notes == (f"{repo / 'CLAUDE.md'}: @docs/x.md is outside the working directory: not imported "
                         "(Claude Code asks the user first)",)  # fmt: skip


def test_a_blank_file_brings_none_of_its_imports(tmp_path: Path) -> None:
    put(tmp_path / "CLAUDE.md", "<!-- @a.md -->\n")
    put(tmp_path / "a.md", "A\n")
    assert load_instructions(tmp_path).files == ()


def test_claude_md_excludes_from_every_settings_file(tmp_path: Path, _no_user_claude_dir: Path) -> None:
    outer, proj = tmp_path / "outer", tmp_path / "outer" / "proj"
    put(outer / "CLAUDE.md", "OUTER (absolute pattern)\n")
    put(proj / "CLAUDE.md", "PROJ @imp1.md @imp2.md\n")
    put(proj / "imp1.md", "IMP1 (**/imp1.md)\n")
    put(proj / "imp2.md", "IMP2\n")
    put(proj / "CLAUDE.local.md", "LOCAL (a relative pattern matches nothing)\n")
    put(proj / ".claude" / "rules" / "xa.md", "XA (rules/x*.md)\n")
    put(proj / ".claude" / "rules" / "ya.md", "YA\n")
    put(_no_user_claude_dir / "CLAUDE.md", "USER (excluded by the user's own pattern)\n")
    put(proj / ".claude" / "settings.json", json.dumps({"claudeMdExcludes": [str(outer / "CLAUDE.md")]}))
    local = ["**/imp1.md", "**/.claude/rules/x*.md", "CLAUDE.local.md"]
    put(proj / ".claude" / "settings.local.json", json.dumps({"claudeMdExcludes": local}))
    put(
        _no_user_claude_dir / "settings.json",
        json.dumps({"claudeMdExcludes": [f"{_no_user_claude_dir}/*.md"]}),
    )
    ws = Workspace.load(proj)
    assert [p.name for p in paths(ws.instructions)] == ["CLAUDE.md", "imp2.md", "ya.md", "CLAUDE.local.md"]
    assert ws.instructions.files[0].path == proj / "CLAUDE.md"
    # Patterns: absolute globs over absolute paths; "!" negates.
    ex = excluder(["/a/**/CLAUDE.md", "!/keep/**"])
    assert ex(Path("/a/b/c/CLAUDE.md")) and ex(Path("/x/y")) and not ex(Path("/keep/CLAUDE.md"))


def test_rules_files_are_a_fork_boundary() -> None:
    assert is_instructions_path(".claude/rules/a.md") and is_instructions_path(".claude/rules/x/y.md")
    assert not is_instructions_path(".claude/rules/notes.txt") and not is_instructions_path("src/a.md")


def test_nested_walk_order_and_once(tmp_path: Path, _no_user_claude_dir: Path) -> None:
    outer, root = tmp_path / "outer", tmp_path / "outer" / "proj"
    put(_no_user_claude_dir / "rules" / "u.md", "---\npaths: sub/*.txt\n---\nUSER SCOPED\n")
    put(outer / ".claude" / "rules" / "anc.md", "---\npaths: proj/sub/*.txt\n---\nANCESTOR SCOPED\n")
    put(outer / ".claude" / "rules" / "anc2.md", "---\npaths: sub/*.txt\n---\nNOT MATCHED\n")
    put(root / ".claude" / "rules" / "r.md", "---\npaths: '*.txt'\n---\nROOT SCOPED\n")
    sub = root / "sub"
    put(sub / "CLAUDE.md", "SUB\n")
    put(sub / ".claude" / "CLAUDE.md", "SUB DOT\n")
    put(sub / "CLAUDE.local.md", "SUB LOCAL <!-- gone -->\n<!-- gone -->\n")
    put(sub / ".claude" / "rules" / "plain.md", "SUB RULE\n")
    put(sub / ".claude" / "rules" / "s.md", "---\npaths: f.txt\n---\nSUB SCOPED\n")
    put(sub / "f.txt", "f\n")
    blocks = nested_reminders(root, [sub / "f.txt"], set)
    heads = [b.split("\n")[1] for b in blocks]
    assert heads == [
        f"Contents of {_no_user_claude_dir / 'rules' / 'u.md'}:",
        f"Contents of {sub / 'CLAUDE.md'}:",
        f"Contents of {sub / '.claude' / 'CLAUDE.md'}:",
        f"Contents of {sub / 'CLAUDE.local.md'}:",
        f"Contents of {sub / '.claude' / 'rules' / 'plain.md'}:",
        f"Contents of {sub / '.claude' / 'rules' / 's.md'}:",
        f"Contents of {outer / '.claude' / 'rules' / 'anc.md'}:",
        f"Contents of {root / '.claude' / 'rules' / 'r.md'}:",
    ]
    assert (
        blocks[3]
        == f"<system-reminder>\nContents of {sub / 'CLAUDE.local.md'}:\n\nSUB LOCAL <!-- gone -->\n\n</system-reminder>"
    )
    sent = {b.split("\n")[1][len("Contents of ") : -1] for b in blocks}
    assert nested_reminders(root, [sub / "f.txt"], lambda: sent) == []
    excluded = excluder(["**/anc.md", "**/sub/CLAUDE.md"])
    again = nested_reminders(root, [sub / "f.txt"], set, excluded=excluded)
    assert len(again) == len(blocks) - 2 and "ANCESTOR SCOPED" not in "".join(again)


SCENARIO = """
name: rules
turns:
  - prompt: "read"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - tools:
          - Read: {file_path: "{root}/src/app.ts"}
          - Read: {file_path: "{root}/src/other.ts"}
      - tools:
          - Read: {file_path: "{root}/b.txt"}
      - text: "Done."
    suggestion: null
"""


def test_a_scoped_rule_comes_with_the_first_read_of_a_file_it_matches(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    put(root / "CLAUDE.md", "ROOT\n")
    put(root / ".claude" / "rules" / "ts.md", "---\npaths: src/**/*.ts\n---\nTS RULE\n")
    put(root / ".claude" / "rules" / "always.md", "ALWAYS\n")
    put(root / "a.txt", "a\n")
    put(root / "b.txt", "b\n")
    put(root / "src" / "app.ts", "x\n")
    put(root / "src" / "other.ts", "y\n")

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
            async with (
                AnthropicModel(base_url=sim.base_url, api_key="x") as model,
                open_session(SessionConfig(project=root, model=model, speculate=False)) as s,
            ):
                out = await s.submit("read")
                assert out.text == "Done.", out
                assert "ALWAYS" in s.key.system[1] and "TS RULE" not in "".join(s.key.system)
                first, second, third = (s.messages[i]["content"] for i in (2, 4, 6))
                assert [b["type"] for b in first] == ["tool_result"]
                rule = root.resolve() / ".claude" / "rules" / "ts.md"
                assert [b["type"] for b in second] == ["tool_result", "tool_result", "text"]
                assert (
                    second[2]["text"]
                    == f"<system-reminder>\nContents of {rule}:\n\nTS RULE\n\n</system-reminder>"
                )
                assert [b["type"] for b in third] == ["tool_result"]

    trio.run(main)
