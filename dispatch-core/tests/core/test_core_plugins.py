"""Hook specs and backend loading (S-30, S-31)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import core_plugins
import pytest
from dispatch import BackendBroken, UnknownBackend, hookspecs
from dispatch.backends import Available, Registry

HOOKS = [n for n, f in vars(hookspecs).items() if n.startswith("dispatch_") and callable(f)]


def _ep(name: str, target: str) -> EntryPoint:
    return EntryPoint(name=name, value=target, group="dispatch.backends")


def _available(name: str, target: str, dist: str = "dist-x") -> Available:
    return Available(name=name, distribution=dist, version="1.0", entry_point=_ep(name, target))


def test_hook_specs_cover_declare_discover_submit_gate_stop_S30() -> None:
    assert sorted(HOOKS) == sorted(
        [
            "dispatch_declare",
            "dispatch_discover",
            "dispatch_submit",
            # together, instead of dispatch_submit: the dry run prints what is sent
            "dispatch_prepare",
            "dispatch_send",
            "dispatch_open_gate",
            "dispatch_stop",
            # optional: a backend that does not implement them says so by omission
            "dispatch_validate",
            "dispatch_logs",
            # optional, may read the scheduler: what its present state makes impossible
            "dispatch_check",
            # with the arrays capability (a sweep's first submissions as one object); the
            # prepare half optional, so the dry run shows the array that is sent
            "dispatch_check_array",
            "dispatch_submit_array",
            "dispatch_prepare_array",
            # deprecated (replaced by dispatch_prepare), still honoured
            "dispatch_render",
        ]
    )
    assert list(hookspecs.HOOKS) == [h for h in HOOKS]
    for hook in ("dispatch_submit", "dispatch_prepare"):
        assert list(inspect.signature(getattr(hookspecs, hook)).parameters) == [
            "job_id",
            "submission",
            "spec",
            "gated",
        ]
    assert list(inspect.signature(hookspecs.dispatch_send).parameters) == ["prepared"]
    assert list(inspect.signature(hookspecs.dispatch_logs).parameters) == [
        "object_id",
        "selection",
    ]
    assert list(inspect.signature(hookspecs.dispatch_discover).parameters) == ["job_ids"]
    assert list(inspect.signature(hookspecs.dispatch_check).parameters) == ["spec"]
    for hook in ("dispatch_submit_array", "dispatch_prepare_array"):
        assert list(inspect.signature(getattr(hookspecs, hook)).parameters) == [
            "group_id",
            "members",
            "max_running",
        ]
    assert list(inspect.signature(hookspecs.dispatch_check_array).parameters) == [
        "size",
        "max_running",
    ]


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_and_tested_S30(hook: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert len(doc.split()) >= 25, f"{hook} needs a real docstring (parameters, return, errors)"
    params = [p for p in inspect.signature(getattr(hookspecs, hook)).parameters]
    for p in params:
        if p not in ("gated", "job_id", "submission"):
            assert p in doc, f"{hook}: parameter {p} is not documented"
    kit = Path(__file__).parents[3] / "dispatch-testing" / "src" / "dispatch_testing"
    used = " ".join(p.read_text() for p in kit.rglob("*.py")) if kit.exists() else ""
    # the kit's submit goes through dispatch_prepare and dispatch_send when a backend has
    # them; the deprecated dispatch_render is exercised by the core's own tests only
    call = {
        "dispatch_declare": ".declarations",
        "dispatch_prepare": ".submit(",
        "dispatch_send": ".submit(",
        "dispatch_render": "",
    }.get(hook, f".{hook.removeprefix('dispatch_')}(")
    assert call in used, f"the conformance kit never exercises {hook}"


def test_entry_point_name_selects_exactly_one_backend_S31() -> None:
    registry = Registry(
        [
            _available("alpha", "core_plugins:Recording", "dispatch-alpha"),
            _available("beta", "core_plugins:Beta", "dispatch-beta"),
        ]
    )
    core_plugins.CALLS.clear()
    beta = registry.get("beta")
    beta.discover(["j1"])
    beta.submit("j1", 1, None, False)  # type: ignore[arg-type]
    beta.stop("x", None)  # type: ignore[arg-type]
    beta.open_gate("x")
    assert core_plugins.CALLS == [
        ("beta", "discover"),
        ("beta", "submit"),
        ("beta", "stop"),
        ("beta", "open_gate"),
    ]
    assert beta.distribution == "dispatch-beta"


def test_duplicate_names_refused_naming_both_distributions_S31() -> None:
    registry = Registry(
        [
            _available("alpha", "core_plugins:Recording", "dispatch-alpha"),
            _available("alpha", "core_plugins:Beta", "dispatch-alpha-fork"),
            _available("beta", "core_plugins:Beta", "dispatch-beta"),
        ]
    )
    with pytest.raises(BackendBroken) as err:
        registry.get("alpha")
    assert "dispatch-alpha" in str(err.value) and "dispatch-alpha-fork" in str(err.value)
    assert registry.get("beta").name == "beta"  # the others still load


@pytest.mark.parametrize(
    "target,words",
    [
        ("core_plugins:Misspelt", "dispatch_discovr"),
        ("core_plugins:WrongArguments", "force"),
        ("core_plugins:Incomplete", "does not implement dispatch_discover"),
        ("core_plugins:WrongName", "declares the name"),
        ("core_plugins:ExplodesOnInit", "needs SCHEDULER_URL"),
        ("no_such_module_anywhere:Backend", "No module named"),
    ],
)
def test_broken_plugin_reported_by_name_without_breaking_others_S31(
    target: str, words: str
) -> None:
    registry = Registry(
        [
            _available("broken", target, "dispatch-broken"),
            _available("beta", "core_plugins:Beta", "dispatch-beta"),
        ]
    )
    loaded, broken = registry.load_all()
    assert list(loaded) == ["beta"]
    assert "broken" in broken and words in broken["broken"]
    with pytest.raises(BackendBroken, match="broken"):
        registry.get("broken")


def test_unknown_backend_says_how_to_fix_S36() -> None:
    with pytest.raises(UnknownBackend, match="can't be found, is its plugin installed"):
        Registry([]).get("mysched")


def test_installed_backends_come_from_the_one_entry_point_group_S31() -> None:
    registry = Registry.from_entry_points()
    assert "local" in registry.names()
    assert registry.describe("local").distribution == "dispatch-core"


def test_heavy_client_libraries_not_imported_by_help_S31() -> None:
    code = (
        "import sys; from dispatch.cli.main import cli\n"
        "try:\n    cli(['--help'])\nexcept SystemExit: pass\n"
        "heavy = [m for m in ('kubernetes', 'pydantic', 'psycopg', 'dispatch_slurm',\n"
        "                     'dispatch_kubeflow') if m in sys.modules]\n"
        "print('HEAVY:' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:"
