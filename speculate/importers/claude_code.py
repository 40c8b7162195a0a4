"""``speculate import claude-code PATH... [--out DIR]``: Claude Code sessions as scenario files.

PATH is a session file, a project directory under ``~/.claude/projects`` or that directory itself (the
default): every ``*.jsonl`` in it and in its project directories, and each session's subagent transcripts
(sidechains, imported as scenarios of their own). Each session becomes ``OUT/<name>.yaml``
(docs/transcripts.md), validated by the scenario parser before it is written; with ``--repo DIR --rev REV``
the project's starting tree is that revision, exported to ``OUT/workspaces/``. A file or record that cannot
be read is skipped and listed (``file:line: reason``) and the import goes on; exit status 3 says something
was skipped, 1 that nothing was imported, 2 that the command itself was wrong. What an import sets aside
(unknown record types, compactions, ...) is counted in the printed summary.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from speculate.importers import checks
from speculate.importers.files import Skipped, discover, load
from speculate.importers.records import TranscriptError
from speculate.importers.redact import Redactor
from speculate.importers.render import render_turns
from speculate.importers.sessions import Counts, RecordedSession, sessions
from speculate.importers.tree import Replayed, RepoError, export, reconstruct, repo_reader
from speculate.sim.scenario import ScenarioError
from speculate.sim.scenario_yaml import parse_scenario

DEFAULT_PROJECTS = Path.home() / ".claude" / "projects"
EXIT_SKIPPED = 3  # scenarios written (or not), but some file or record could not be read


@dataclass(frozen=True, kw_only=True)
class ImportConfig:
    paths: tuple[Path, ...] = ()  # default: ~/.claude/projects
    out: Path = Path("imported")
    repo: Path | None = None
    rev: str | None = None
    redact: bool = False
    redact_key: str = ""


@dataclass
class Imported:
    written: list[Path] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    lines: list[str] = field(default_factory=list)  # one per scenario written, for the summary
    skipped: Skipped = field(default_factory=Skipped)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "project"


class _Literal(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks (when YAML allows one), so prompts and answers stay readable."""


def _str(dumper: yaml.SafeDumper, s: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


_Literal.add_representer(str, _str)


def dump(doc: dict[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_Literal, sort_keys=False, allow_unicode=True, width=110)


def redacted(session: RecordedSession, r: Redactor) -> None:
    """Redact a session in place: prompts, answers, tool inputs and recorded results."""
    r.learn(_strings(session))
    for turn in session.turns:
        turn.prompt = r.text(turn.prompt)
        for step in turn.steps:
            step.text = [r.text(t) for t in step.text]
            step.thinking = [r.text(t) for t in step.thinking]
            for use in step.tools:
                old, new = use.input.get("old_string"), use.input.get("new_string")
                inside = use.name == "Edit" and isinstance(old, str) and r.inside_literal(old)
                use.input = r.value(use.input)
                if inside and isinstance(new, str):  # new text inside the same quotes: a literal too
                    use.input["new_string"] = r.literal(new)
                if use.result is not None:
                    use.result.text = r.text(use.result.text)
                    use.result.structured = r.value(use.result.structured)


def _strings(session: RecordedSession) -> Iterable[str]:
    def walk(v: Any) -> Iterable[str]:
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for x in v.values():
                yield from walk(x)
        elif isinstance(v, list):
            for x in v:
                yield from walk(x)

    for turn in session.turns:
        yield turn.prompt
        for step in turn.steps:
            yield from step.text
            yield from step.thinking
            for use in step.tools:
                yield from walk(use.input)
                if use.result is not None:
                    yield use.result.text
                    yield from walk(use.result.structured)


def scenario_doc(
    session: RecordedSession,
    cfg: ImportConfig,
    workspace: tuple[str, Path] | None,
    counts: Counts,
    redactor: Redactor | None,
) -> dict[str, Any]:
    project = Path(session.cwd or "project").name
    if redactor is not None:
        redacted(session, redactor)
        project = redactor.component(project)
    name = (
        f"cc-{slug(project)}-{slug(session.session_id)[:8]}"
        + (f"-agent-{slug(session.agent_id)[:8]}" if session.agent_id else "")
        + (f"-{session.part}" if session.part > 1 else "")
    )
    if workspace is not None:
        start = repo_reader(workspace[1])
    else:
        tree = reconstruct(session.turns, session.cwd, counts)
        start = tree.state
    ctx = checks.Context(tree_complete=workspace is not None, redacted=redactor is not None, root=session.cwd)
    turns = render_turns(session, Replayed(start, session.cwd), ctx, counts)
    when = next((t.at for t in session.turns if t.at is not None), None)
    known, unknown = session.sources
    desc = (
        f"Claude Code {session.version or '?'} "
        + (f"subagent {session.agent_id} of session" if session.agent_id else "session")
        + f" {session.session_id} in {project}"
        f"{when.strftime(' on %Y-%m-%d') if when else ''} (model {session.model or '?'}); "
        + (
            f"promptSource absent on {unknown} of {known + unknown} prompts: which were taken from a "
            "suggestion is unknown; "
            if unknown
            else ""
        )
        + "imported by speculate import claude-code"
    )
    doc: dict[str, Any] = {"name": name, "description": desc}
    # Whether the suggestions were recorded: without promptSource, a null suggestion means "unknown", not
    # "typed" (a subagent's prompts come from the main agent: no suggestion was possible).
    doc["acceptance"] = "unknown" if unknown else "recorded"
    if workspace is not None:
        doc["workspace"] = workspace[0]
    else:
        files = {rel: content for rel, content in sorted(tree.files.items()) if content is not None}
        if files:
            doc["files"] = files
    doc["turns"] = turns
    return doc


def import_sessions(cfg: ImportConfig) -> Imported:
    """Import every session under ``cfg.paths`` into ``cfg.out``; TranscriptError or RepoError on bad input."""
    res = Imported()
    counts = res.counts
    if cfg.redact and cfg.repo is not None:
        raise RepoError(
            "--redact with --repo: the exported tree would hold the repository unredacted; "
            "redact imports without --repo (the tree the transcript shows)"
        )
    files = discover(cfg.paths or (DEFAULT_PROJECTS,))
    cfg.out.mkdir(parents=True, exist_ok=True)
    workspace: tuple[str, Path] | None = None
    if cfg.repo is not None:
        ws = f"{slug(cfg.repo.resolve().name)}-{slug(cfg.rev or 'HEAD')[:12]}"
        commit = export(cfg.repo, cfg.rev or "HEAD", cfg.out / "workspaces" / ws)
        workspace = (ws, cfg.out / "workspaces" / ws)
        res.lines.append(f"workspace {cfg.out / 'workspaces' / ws}: {cfg.repo} at {commit[:12]}")
    found: list[tuple[Path, RecordedSession]] = []
    for path in files:
        records = load(path, counts, res.skipped)
        if records is None:
            continue
        try:
            got = sessions(path, records, counts)
        except Exception as e:  # one file's surprise must not stop a folder of hundreds: listed, exit 3
            _failed(res, path, e)
            continue
        if not got:
            counts["files with no conversation (empty, or bookkeeping only)"] += 1
        found += [(path, s) for s in got]
    # A forked session (--fork-session) starts its file with a copy of the conversation, uuids and all: the
    # longest session first keeps the whole conversation in one scenario, and a prompt seen before is not
    # imported twice.
    found.sort(key=lambda f: -len(f[1].turns))
    seen: set[str] = set()
    for path, s in found:
        copied = [t for t in s.turns if t.uuid is not None and t.uuid in seen]
        if copied:
            counts["prompts already imported from another file (a forked session's copy, left out)"] += len(
                copied
            )
            s.turns = [t for t in s.turns if t not in copied]
        seen.update(t.uuid for t in s.turns if t.uuid is not None)
        try:
            _import_session(path, s, cfg, workspace, res)
        except Exception as e:  # as above
            _failed(res, path, e)
    return res


def _failed(res: Imported, path: Path, e: Exception) -> None:
    res.skipped.files.append(
        f"{path}: the importer failed on it ({type(e).__name__}: {e}; a bug: please report)"
    )
    res.counts["files skipped (importer error)"] += 1


def _import_session(
    path: Path, s: RecordedSession, cfg: ImportConfig, workspace: tuple[str, Path] | None, res: Imported
) -> None:
    counts = res.counts
    if not s.turns:  # every prompt a copy of another file's
        counts["sessions with no turn left to import (all copied from another file)"] += 1
        return
    if s.agent_id:
        counts["subagent transcripts (sidechains, imported as their own scenarios)"] += 1
    redactor = Redactor(key=cfg.redact_key, root=s.cwd) if cfg.redact else None
    doc = scenario_doc(s, cfg, workspace, counts, redactor)
    if redactor is not None:
        for what, n in redactor.removed.items():
            counts[f"redacted ({what})"] += n
    if not doc["turns"]:
        counts["sessions with no turn to replay"] += 1
        return
    if any(w.stem == doc["name"] for w in res.written):  # another file of the same session (resumed)
        n = 2
        while any(w.stem == f"{doc['name']}-f{n}" for w in res.written):
            n += 1
        doc["name"] = f"{doc['name']}-f{n}"
        counts["files of a session already imported from another file (named -f2, ...)"] += 1
    text = dump(doc)
    target = cfg.out / f"{doc['name']}.yaml"
    try:
        sc = parse_scenario(text, source=str(target), base_dir=cfg.out)
    except ScenarioError as e:  # an importer bug: say so, keep going
        counts["sessions the importer could not write (a bug: please report)"] += 1
        res.lines.append(f"{path}: not written: {e}")
        return
    target.write_text(text, encoding="utf-8")
    res.written.append(target)
    taken = sum(t.suggestion is not None for t in sc.turns)
    n_exp = sum(st.checked for t in sc.turns for st in t.steps)  # tool results an expectation checks
    known, unknown = s.sources
    if unknown:
        counts[
            "scenarios with acceptance unknown (promptSource absent: a null suggestion is not 'typed')"
        ] += 1
    how = (
        "subagent: prompts from the main agent"
        if s.agent_id
        else f"promptSource on {known} of {known + unknown} prompts"
        + (": acceptance unknown" if unknown else "")
    )
    res.lines.append(
        f"{target}: {len(sc.turns)} turns ({taken} taken from suggestions; {how}), "
        f"{n_exp} expectations, {len(sc.files)} files"
        + (f", workspace {sc.workspace.name}" if sc.workspace else "")
    )


def configure(ap: argparse.ArgumentParser) -> None:
    """The options of ``speculate import claude-code`` (on the command tree of :mod:`speculate.cli`)."""
    ap.description = (
        "Claude Code session transcripts as scenario files (docs/transcripts.md). A file or record that "
        "cannot be read is skipped and listed, and the rest imported. Exit status: 0 all read, 3 something "
        "skipped, 1 nothing to import, 2 a bad command line."
    )
    ap.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help=f"a session .jsonl, a project directory, or the projects directory (default {DEFAULT_PROJECTS})",
    )
    ap.add_argument(
        "--out", type=Path, default=Path("imported"), help="where the scenarios go (default ./imported)"
    )
    ap.add_argument(
        "--repo",
        type=Path,
        default=None,
        metavar="DIR",
        help="the project's git repository: its --rev is the starting tree (default: the files the "
        "transcript shows)",
    )
    ap.add_argument(
        "--rev",
        default=None,
        metavar="REV",
        help="with --repo: the revision the sessions started from (default HEAD)",
    )
    ap.add_argument(
        "--redact", action="store_true", help="replace string literals and paths by stable placeholders"
    )
    ap.add_argument(
        "--redact-key",
        default="",
        metavar="KEY",
        help="with --redact: a secret mixed into the placeholders, so names cannot be confirmed by guessing",
    )
    ap.set_defaults(run=import_run)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="speculate import claude-code")
    configure(ap)
    return ap


def summary(res: Imported) -> str:
    lines = [*res.lines, f"{len(res.written)} scenario(s) written"]
    if res.skipped:
        lines.append(
            f"skipped {len(res.skipped.files)} file(s) and {len(res.skipped.records)} record(s) "
            "that could not be read:"
        )
        lines += [f"  file {x}" for x in res.skipped.files] + [f"  record {x}" for x in res.skipped.records]
    noticed = sorted((k, v) for k, v in res.counts.items() if k != "records")
    lines.append(f"read {res.counts['records']} records" + ("; set aside or noticed:" if noticed else ""))
    lines += [f"  {v:>6}  {k}" for k, v in noticed]
    return "\n".join(lines)


def import_main(argv: list[str]) -> int:
    """``speculate import claude-code ...`` outside the command tree (``argv`` starts with "claude-code")."""
    if not argv or argv[0] != "claude-code":
        print(
            "usage: speculate import claude-code [PATH ...] [--out DIR] [--repo DIR [--rev REV]] [--redact]",
            file=sys.stderr,
        )
        return 2
    return import_run(build_parser().parse_args(argv[1:]))


def import_run(a: argparse.Namespace) -> int:
    if a.rev is not None and a.repo is None:
        print("speculate import: --rev needs --repo DIR", file=sys.stderr)
        return 2
    cfg = ImportConfig(
        paths=tuple(a.paths), out=a.out, repo=a.repo, rev=a.rev, redact=a.redact, redact_key=a.redact_key
    )
    try:
        res = import_sessions(cfg)
    except (TranscriptError, RepoError) as e:
        print(f"speculate import: {e}", file=sys.stderr)
        return 2
    print(summary(res))
    if res.skipped:
        print(
            f"speculate import: skipped {len(res.skipped.files)} file(s) and {len(res.skipped.records)} "
            "record(s) (listed above)",
            file=sys.stderr,
        )
        return EXIT_SKIPPED
    return 0 if res.written else 1
