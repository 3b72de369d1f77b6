"""dispatch-testing: the conformance kit every dispatch backend must pass, and a simulated,
fault-injecting scheduler. Adapters implement :class:`dispatch_testing.harness.Harness`."""

from dispatch_testing.harness import (
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
