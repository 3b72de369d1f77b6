"""dispatch-testing: the conformance kit every dispatch backend must pass
(:mod:`dispatch_testing.kit`), and a simulated, fault-injecting scheduler. Adapters
implement :class:`dispatch_testing.kit.Harness`."""

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

__all__ = [
    "EXPECTED",
    "GROUP",
    "Expectation",
    "Harness",
    "NotProvokable",
    "Provoked",
    "Scenario",
    "required_scenarios",
]
