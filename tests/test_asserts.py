"""No invariant that matters rests on an ``assert`` in production code: ``python -O`` drops every one.

The only ``assert`` allowed in ``speculate``, ``overlayfs`` and ``bench`` narrows a type for the checker,
``assert <name or attribute> is not None`` (or several joined by ``and``), where the next use of the value
fails loudly anyway if it is None. Anything else (a check on data, the user's tree, the conversation, a
benchmark's run) raises one of the project's exceptions with a message naming what was wrong. Exempt: the
scenarios' sample project (the user's code, with its own tests) and the pytest-benchmark modules (pytest
rewrites their asserts; they are tests).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("speculate", "overlayfs", "bench")


def _is_narrowing(test: ast.expr) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_is_narrowing(v) for v in test.values)
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and _is_name_or_attribute(test.left)
    )


def _is_name_or_attribute(e: ast.expr) -> bool:
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)


def _is_pytest_module(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
        for n in tree.body
    )


def offending_asserts(package_dir: Path) -> list[str]:
    """``path:line: source`` of every assert under ``package_dir`` that is not a narrowing one."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent).as_posix()
        if "/scenarios/workspaces/" in rel:
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        if _is_pytest_module(tree):
            continue
        found += [
            f"{rel}:{n.lineno}: {ast.unparse(n)}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Assert) and not _is_narrowing(n.test)
        ]
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_production_code_asserts_only_to_narrow_types(package: str) -> None:
    assert (ROOT / package / "__init__.py").is_file()
    bad = offending_asserts(ROOT / package)
    assert bad == [], "asserts vanish under python -O; raise a project error instead:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("source", "allowed"),
    [
        ("assert x is not None", True),
        ("assert self.fe is not None, 'attach a front end first'", True),
        ("assert a.b is not None and c is not None", True),
        ("assert x", False),
        ("assert isinstance(x, int)", False),
        ("assert f() is not None", False),
        ("assert x is not None or y is not None", False),
        ("assert x is None", False),
        ("assert x.y == 0", False),
        ("assert x is not None and x.ready", False),
    ],
)
def test_the_check_tells_narrowing_from_an_invariant(source: str, allowed: bool, tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text(f"def f(x, y, a, c, self):\n    {source}\n")
    assert (offending_asserts(pkg) == []) is allowed
    (pkg / "test_mod.py").write_text(f"def test_it(x):\n    {source}\n")  # a pytest module: exempt
    assert (offending_asserts(pkg) == []) is allowed


# Each built-in tool, handed another tool's input model (our bug: ``Tool.parse`` makes its own), under -O.
_WRONG_INPUT = """
import trio
from speculate.errors import InternalError
from speculate.tools.bash import Bash
from speculate.tools.edit import Edit
from speculate.tools.glob import Glob
from speculate.tools.grep import Grep, GrepInput
from speculate.tools.read import Read
from speculate.tools.write import Write, WriteInput

other = WriteInput(file_path="f", content="x")
calls = {"Bash.is_read_only": lambda: Bash().is_read_only(other), "Edit": lambda: Edit().run(other, None),
         "Glob": lambda: Glob().run(other, None), "Grep": lambda: trio.run(Grep().call, other, None),
         "Read": lambda: Read().run(other, None), "Write": lambda: Write().run(GrepInput(pattern="x"), None)}
for name, call in calls.items():
    try:
        call()
    except InternalError as e:
        print(name, "raised:", e)
    except Exception as e:
        print(name, "went on and failed elsewhere:", type(e).__name__, e)
    else:
        print(name, "went on quietly")
"""


def test_a_tool_handed_another_tools_input_says_so_under_python_O() -> None:
    out = subprocess.run(
        [sys.executable, "-O", "-c", _WRONG_INPUT], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 6 and all(" raised: the " in line for line in lines), out.stdout
    assert "the Write tool was called with a GrepInput, not its WriteInput" in out.stdout
