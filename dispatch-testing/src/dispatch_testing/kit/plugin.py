"""The pytest plugin of the conformance kit (``pytest11`` entry point ``dispatch_testing``).

Inert unless asked for: without ``--dispatch-backend`` and without a subclass of
:class:`dispatch_testing.kit.BackendConformance` in the collected tests, it only adds its
two options and starts no harness.

``pytest --dispatch-backend NAME`` runs the kit against the backend registered as ``NAME``
(in ``dispatch.backends``) with the harness registered as ``NAME`` (in
``dispatch.harnesses``); if no test paths are given it runs the kit's own suite, so it is
the same as ``dispatch-conformance NAME``. ``--dispatch-live`` selects the live tier.

A subclass of ``BackendConformance`` may override a kit test only to mark it
``xfail(reason=..., strict=True)`` (or with ``xfail_strict = true`` in the ini file);
anything else — a plain override, a test set to None, an xfail without a reason, a
non-strict xfail — stops the run with a usage error naming the test.

The plugin uses the suite and the kit's view; neither imports the plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from dispatch_testing.kit.view import Kit

#: the module ``dispatch-conformance`` and ``--dispatch-backend`` collect
SUITE = Path(__file__).with_name("conformance_tests.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dispatch", "dispatch conformance kit (dispatch-testing)")
    group.addoption(
        "--dispatch-backend",
        metavar="NAME",
        default=None,
        help="run the dispatch conformance kit against the backend and harness NAME",
    )
    group.addoption(
        "--dispatch-live",
        action="store_true",
        default=False,
        help="use the harness's live tier (a real scheduler) instead of the offline one",
    )


def pytest_configure(config: pytest.Config) -> None:
    name = config.getoption("dispatch_backend")
    if not name:
        return
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args = [str(SUITE)]
    from dispatch_testing.kit.view import kit_of

    kit_of(config, name)  # a missing or broken harness is a usage error, before collection


def _is_kit_class(cls: object) -> bool:
    return isinstance(cls, type) and bool(getattr(cls, "__dispatch_kit__", False))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not _is_kit_class(metafunc.cls):
        return
    assert metafunc.cls is not None
    from dispatch_testing.kit.view import kit_for

    if "scenario" in metafunc.fixturenames:
        kit = kit_for(metafunc.config, metafunc.cls)
        scenarios = kit.scenarios_to_test()
        metafunc.parametrize("scenario", scenarios, ids=[s.value for s in scenarios])
    if "capability" in metafunc.fixturenames:
        kit = kit_for(metafunc.config, metafunc.cls)
        pairs = kit.capabilities_to_test()
        metafunc.parametrize(
            "capability", [c for c, _ in pairs], ids=[f"{c.value}-{how}" for c, how in pairs]
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    problems: set[str] = set()
    for cls in {getattr(i, "cls", None) for i in items}:
        if _is_kit_class(cls):
            assert isinstance(cls, type)
            problems.update(_override_problems(config, cls))
    if problems:
        raise pytest.UsageError(
            "the dispatch kit's tests may only be overridden by an xfail with a reason "
            "(strict):\n" + "\n".join(f"  - {p}" for p in sorted(problems))
        )


def _override_problems(config: pytest.Config, cls: type) -> list[str]:
    from dispatch_testing.kit.suite import BackendConformance

    problems = []
    strict_ini = bool(config.getini("xfail_strict"))
    for name in dir(BackendConformance):
        if not name.startswith("test_"):
            continue
        original = getattr(BackendConformance, name)
        mine = getattr(cls, name, None)
        if mine is original:
            continue
        where = f"{cls.__qualname__}.{name}"
        if not callable(mine):
            problems.append(f"{where} removes a kit test")
            continue
        marks = [m for m in getattr(mine, "pytestmark", []) if m.name == "xfail"]
        if not marks:
            problems.append(f"{where} overrides a kit test without marking it xfail")
            continue
        for mark in marks:
            if not mark.kwargs.get("reason"):
                problems.append(f"{where}: its xfail gives no reason")
            if not mark.kwargs.get("strict", strict_ini):
                problems.append(f"{where}: its xfail is not strict (set xfail_strict = true)")
    return problems


def _started(config: pytest.Config) -> list[Kit]:
    """The kits this run started; none (and nothing imported) when the kit was not used."""
    view = sys.modules.get("dispatch_testing.kit.view")
    return [] if view is None else list(config.stash.get(view.KITS, {}).values())


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for kit in _started(config):
        terminalreporter.write_line(kit.summary())


def pytest_unconfigure(config: pytest.Config) -> None:
    for kit in _started(config):
        kit.close()
