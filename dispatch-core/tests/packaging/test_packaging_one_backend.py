"""Install one backend, as the README says: ``pip install ./dispatch-core ./dispatch-slurm``
from the source tree, or the wheels ``python -m build`` makes, in a clean virtual
environment: ``dispatch backends`` lists ``local`` and ``slurm`` and nothing else. And the
demo installs dispatch-core alone.

The dependencies are fetched once into a wheelhouse (``pip download``, from pip's cache
when it holds them); every install here then runs with ``--no-index --find-links`` on it,
as on a cluster without network access.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=900
    )
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of dispatch-core's dependencies and of its build backend, nothing of ours."""
    house = tmp_path_factory.mktemp("wheelhouse")
    project = tomllib.loads((ROOT / "dispatch-core" / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    _run(sys.executable, "-m", "pip", "download", "-q", "-d", house, *wanted)
    assert not list(house.glob("dispatch*")), "the wheelhouse holds no dispatch distribution"
    return house


def _offline(house: Path) -> dict[str, str]:
    """pip (and build's isolated environments) install from the wheelhouse alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "DISPATCH_"))}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(house), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _clean_venv(tmp: Path, name: str) -> Path:
    env = tmp / name
    venv.create(env, with_pip=True, clear=True)
    return env


def _backends(env: Path, tmp: Path) -> tuple[list[str], str]:
    run_env = {"PATH": f"{env / 'bin'}:/usr/bin:/bin", "XDG_STATE_HOME": str(tmp / "state")}
    listed = json.loads(_run(env / "bin" / "dispatch", "backends", "--json", env=run_env))
    names = [b["name"] for b in listed["backends"]]
    return names, _run(env / "bin" / "dispatch", "backends", env=run_env)


def test_pip_install_of_core_and_slurm_from_the_source_tree_lists_two_backends(
    wheelhouse: Path, tmp_path: Path
) -> None:
    env = _clean_venv(tmp_path, "venv")
    _run(
        env / "bin" / "python",
        *("-m", "pip", "install", "-q", "./dispatch-core", "./dispatch-slurm"),
        cwd=ROOT,
        env=_offline(wheelhouse),
    )
    names, text = _backends(env, tmp_path)
    assert names == ["local", "slurm"]
    assert [line.split()[0] for line in text.splitlines() if not line.startswith(" ")] == [
        "local",
        "slurm",
    ]
    installed = _run(env / "bin" / "python", "-m", "pip", "list", "--format=json")
    ours = sorted(p["name"] for p in json.loads(installed) if p["name"].startswith("dispatch"))
    assert ours == ["dispatch-core", "dispatch-slurm"]


def test_wheels_built_with_python_m_build_install_one_backend(
    wheelhouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    for dist in ("dispatch-core", "dispatch-slurm"):
        # sdist first, then the wheel from the sdist: nothing is built inside the checkout
        _run(
            sys.executable,
            "-m",
            "build",
            "-q",
            "--outdir",
            out,
            ROOT / dist,
            env=_offline(wheelhouse),
        )
    wheels = sorted(out.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["dispatch_core", "dispatch_slurm"]
    env = _clean_venv(tmp_path, "venv")
    _run(env / "bin" / "python", "-m", "pip", "install", "-q", *wheels, env=_offline(wheelhouse))
    names, _ = _backends(env, tmp_path)
    assert names == ["local", "slurm"]


def test_the_demo_installs_dispatch_core_alone_and_recovers_its_job(
    wheelhouse: Path, tmp_path: Path
) -> None:
    """scripts/demo.sh: no example adapter, no testing distribution, no other backend."""
    env = _offline(wheelhouse)
    env.update(DEMO_VENV=str(tmp_path / "demo-venv"), XDG_STATE_HOME=str(tmp_path / "state"))
    shown = _run("bash", ROOT / "scripts" / "demo.sh", env=env)
    installed = _run(
        tmp_path / "demo-venv" / "bin" / "python", "-m", "pip", "list", "--format=json"
    )
    ours = sorted(p["name"] for p in json.loads(installed) if p["name"].startswith("dispatch"))
    assert ours == ["dispatch-core"]
    backends = shown.split("$ dispatch backends\n", 1)[1].split("\n$ ", 1)[0]
    assert [line.split()[0] for line in backends.splitlines() if line[:1].isalpha()] == ["local"]
    assert "succeeded" in shown and "recovering" in shown
