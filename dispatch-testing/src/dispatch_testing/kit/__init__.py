"""The dispatch conformance kit: the tests every backend must pass, and what an adapter
writes to run them (a :class:`Harness`).

Import what you need from here::

    from dispatch_testing.kit import BackendConformance, Harness, NotProvokable, Provoked, Scenario

The package:

- ``harness``: the :class:`Harness` base class an adapter implements, the scenarios and
  what each must end as (:data:`EXPECTED`);
- ``suite``: :class:`BackendConformance`, the kit's tests, one module per area;
- ``view``: :class:`Kit`, the kit's view of the backend under test, and the checks every
  discovery must pass;
- ``plugin``: the pytest plugin (options, parametrisation, the rule on overrides);
- ``conformance_tests``: the module ``dispatch-conformance NAME`` runs;
- ``local_harness``: the harness of dispatch-core's ``local`` backend.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from dispatch_testing.kit.harness import (
    EXPECTED,
    GROUP,
    Expectation,
    Harness,
    NotProvokable,
    Provoked,
    Scenario,
    required_scenarios,
)

if TYPE_CHECKING:
    from dispatch_testing.kit.suite import BackendConformance
    from dispatch_testing.kit.view import Kit, KitError, check_discovery

#: imported when first asked for: the plugin, loaded by every pytest run, imports this
#: package, and a run that does not use the kit needs neither the suite nor the view
_LAZY = {
    "BackendConformance": "dispatch_testing.kit.suite",
    "Kit": "dispatch_testing.kit.view",
    "KitError": "dispatch_testing.kit.view",
    "check_discovery": "dispatch_testing.kit.view",
}

__all__ = [
    "EXPECTED",
    "GROUP",
    "BackendConformance",
    "Expectation",
    "Harness",
    "Kit",
    "KitError",
    "NotProvokable",
    "Provoked",
    "Scenario",
    "check_discovery",
    "required_scenarios",
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
