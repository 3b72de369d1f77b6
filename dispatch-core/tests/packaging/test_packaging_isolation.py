"""Each distribution builds its own wheel and installs alone (S-31): dispatch-core with no
adapter, and dispatch-core + dispatch-slurm without the Kubernetes client. Real wheels,
real clean virtual environments; dependencies come from the package index.

The product wheels (core and the two adapters) carry no test infrastructure: the
emulator, the kit harnesses, the scenario drivers and the crash hook live in the test
distributions, and installing the kit adds no production backend."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("dispatch-core", "dispatch-slurm", "dispatch-kubeflow")
TEST_ONLY = ("dispatch-testing", "dispatch-slurm-testing", "dispatch-kubeflow-testing")
#: what only tests need: a module path part, or a word in a module's text
TEST_MODULES = ("emulator", "harness", "provoke")
TEST_WORDS = ("DISPATCH_CRASH_AT",)


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    out = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=600
    )
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    built = {}
    for dist in (*PRODUCT, *TEST_ONLY):
        # setuptools builds in the source tree and never deletes from build/: start clean,
        # or a module removed from src/ would still ship
        shutil.rmtree(ROOT / dist / "build", ignore_errors=True)
        _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, ROOT / dist)
        (wheel,) = out.glob(dist.replace("-", "_") + "-*.whl")
        built[dist] = wheel
    return built


def _fresh(tmp: Path, name: str, *wheels: Path) -> Path:
    env = tmp / name
    venv.create(env, with_pip=True, clear=True)
    _run(env / "bin" / "python", "-m", "pip", "install", "-q", *wheels)
    return env


PROBE = """
import importlib.util, json, sys
from dispatch.backends import Registry
mods = {m: importlib.util.find_spec(m) is not None for m in sys.argv[1:]}
print(json.dumps({"names": Registry.from_entry_points().names(), "mods": mods}))
"""


def _probe(env: Path) -> dict[str, object]:
    import json

    mods = ["dispatch_slurm", "dispatch_kubeflow", "kubernetes", "psycopg", "dispatch_testing"]
    return json.loads(_run(env / "bin" / "python", "-c", PROBE, *mods))  # type: ignore[no-any-return]


def test_core_alone_installs_and_runs_the_demo_path(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    env = _fresh(tmp_path, "core", wheels["dispatch-core"])
    seen = _probe(env)
    assert seen["names"] == ["local"]
    assert not any(seen["mods"].values())  # type: ignore[attr-defined]
    out = subprocess.run(
        [env / "bin" / "dispatch", "submit", "--wait", "--interval", "0.2", "--", "true"],
        capture_output=True,
        text=True,
        env={"XDG_STATE_HOME": str(tmp_path / "s"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "succeeded" in out.stdout


def test_core_and_slurm_without_kubernetes(wheels: dict[str, Path], tmp_path: Path) -> None:
    env = _fresh(tmp_path, "slurm", wheels["dispatch-core"], wheels["dispatch-slurm"])
    seen = _probe(env)
    assert seen["names"] == ["local", "slurm"]
    assert seen["mods"] == {
        "dispatch_slurm": True,
        "dispatch_kubeflow": False,
        "kubernetes": False,
        "psycopg": False,
        "dispatch_testing": False,
    }
    _run(env / "bin" / "dispatch", "backends")


def test_core_and_kubeflow_and_the_kit(wheels: dict[str, Path], tmp_path: Path) -> None:
    env = _fresh(
        tmp_path,
        "kubeflow",
        wheels["dispatch-core"],
        wheels["dispatch-kubeflow"],
        wheels["dispatch-testing"],
    )
    seen = _probe(env)
    assert seen["names"] == ["kubeflow", "local"]
    assert seen["mods"]["kubernetes"] and not seen["mods"]["dispatch_slurm"]  # type: ignore[index]
    _run(env / "bin" / "dispatch-conformance", "--help")


@pytest.mark.parametrize("dist", PRODUCT)
def test_product_wheels_hold_no_test_infrastructure(wheels: dict[str, Path], dist: str) -> None:
    """Issue 9: what a production user installs has no emulator, harness, scenario driver
    or fault hook in it."""
    import zipfile

    with zipfile.ZipFile(wheels[dist]) as wheel:
        modules = [n for n in wheel.namelist() if n.endswith(".py")]
        found = [n for n in modules if any(part in n for part in TEST_MODULES)]
        assert not found, f"{dist} ships test infrastructure: {found}"
        for name in modules:
            text = wheel.read(name).decode()
            words = [w for w in TEST_WORDS if w in text]
            assert not words, f"{dist}: {name} holds {words}"


def test_the_kit_alone_adds_no_backend_and_the_slurm_kit_runs_from_its_wheel(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 9: `pip install dispatch-testing` registers no `simulated` backend unasked, and
    the Slurm harness finds its start script inside its own wheel (not in a checkout)."""
    env = _fresh(
        tmp_path,
        "kits",
        wheels["dispatch-core"],
        wheels["dispatch-testing"],
        wheels["dispatch-slurm"],
        wheels["dispatch-slurm-testing"],
    )
    assert _probe(env)["names"] == ["local", "slurm"]
    script = _run(
        env / "bin" / "python",
        "-c",
        "import importlib.resources as r; "
        "print(r.files('dispatch_slurm_testing').joinpath('start-slurm.sh').is_file())",
    )
    assert script.strip() == "True"
    _run(env / "bin" / "dispatch-conformance", "--help")
    asked = _run(
        env / "bin" / "python",
        "-c",
        "import dispatch_testing.simulated as s; s.register(); "
        "from dispatch.backends import Registry; print(Registry.from_entry_points().names())",
    )
    assert "simulated" in asked, "the kit's simulated backend is there when a test asks for it"
