"""The wheel built from the tracked files: ``speculate`` and ``overlayfs``, the bundled scenarios as
``speculate.sim.bundled``, and no top-level ``bench`` (its name is too common to claim in site-packages) and
no kept results. Installed outside a checkout, it serves its bundled scenarios and refuses ``speculate
bench`` by name rather than with a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy of what git would commit: building in the checkout would leave build/ there
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    dist = tmp / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    return next(dist.glob("speculate-*.whl"))


def test_the_wheel_holds_the_package_and_its_scenarios_not_the_benchmark(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"speculate", "overlayfs"}, tops
    assert "speculate/sim/bundled/fix-pagination.yaml" in names
    assert "speculate/sim/bundled/workspaces/sample_project/src/shop/pager.py" in names
    assert "overlayfs/stage.c" in names  # the sandbox's stage program is built from it when first needed
    assert not [n for n in names if "headline" in n or n.endswith((".jsonl", ".jsonl.gz", ".png"))]


def _installed(wheel: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run this interpreter with the unpacked wheel first on its path, from a directory with no checkout."""
    site = tmp / "site"
    if not site.is_dir():
        zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=120
    )


def test_an_installed_copy_serves_its_bundled_scenarios_and_refuses_the_benchmark_by_name(
    wheel: Path, tmp_path: Path
) -> None:
    r = _installed(
        wheel,
        tmp_path,
        "-c",
        "import speculate, importlib.util as u; from speculate.sim.scenario import default_scenario_paths as d; "
        "print(speculate.__file__); print(len(d()), d()[0].parent); print(u.find_spec('bench'))",
    )
    assert r.returncode == 0, r.stderr
    where, scenarios, bench = r.stdout.splitlines()
    site = tmp_path / "site"
    assert where == str(site / "speculate" / "__init__.py")
    n, directory = scenarios.split(" ", 1)
    assert int(n) >= 10 and directory == str(site / "speculate" / "sim" / "bundled")
    assert bench == "None"

    check = _installed(
        wheel,
        tmp_path,
        "-m",
        "speculate.cli",
        "sim",
        "check",
        str(site / "speculate/sim/bundled/fix-pagination.yaml"),
    )
    assert check.returncode == 0 and "ok: 'fix-pagination'" in check.stdout, check.stdout + check.stderr

    for argv in (["bench", "--quick"], ["bench", "check", "x.yaml"], ["bench", "export", "run"]):
        r = _installed(wheel, tmp_path, "-m", "speculate.cli", *argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert (
            "the benchmark (bench/) is part of the source checkout, not of the installed package" in r.stderr
        )
        assert "Traceback" not in r.stderr
