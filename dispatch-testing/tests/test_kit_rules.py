"""The kit's rules about itself: overrides only as strict xfails with a reason, required
scenarios never dropped in silence, not-provokable scenarios reported with their reason."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFORMANCE = """
import pytest
from dispatch_testing.kit import BackendConformance
from dispatch_testing.simulated.harness import SimulatedHarness

class TestMine(BackendConformance):
    harness_class = SimulatedHarness
{body}
"""


def run(pytester: pytest.Pytester, body: str, ini: str = "xfail_strict = true") -> pytest.RunResult:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_mine=CONFORMANCE.format(body=body))
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rxX"
    )


def test_kit_refuses_a_plain_override(pytester: pytest.Pytester) -> None:
    """An adapter cannot replace a kit test with one that passes."""
    result = run(pytester, "    def test_stop_is_idempotent(self):\n        pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*TestMine.test_stop_is_idempotent overrides a kit test*"])


def test_kit_refuses_a_removed_test(pytester: pytest.Pytester) -> None:
    """Setting a kit test to None does not make it disappear quietly."""
    result = run(pytester, "    test_stop_is_idempotent = None\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*TestMine.test_stop_is_idempotent removes a kit test*"])


def test_kit_refuses_an_xfail_without_reason_or_not_strict(pytester: pytest.Pytester) -> None:
    body = (
        "    @pytest.mark.xfail\n"
        "    def test_stop_is_idempotent(self, kit):\n        raise AssertionError\n"
        "    @pytest.mark.xfail(reason='later', strict=False)\n"
        "    def test_everything_reported_round_trips(self, kit):\n        raise AssertionError\n"
    )
    result = run(pytester, body, ini="")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*test_everything_reported_round_trips: its xfail is not strict*",
            "*test_stop_is_idempotent: its xfail gives no reason*",
        ]
    )


def test_kit_accepts_a_strict_xfail_with_reason_and_fails_it_when_it_passes(
    pytester: pytest.Pytester,
) -> None:
    """The one allowed override; xfail_strict turns an override that passes into a failure."""
    body = (
        "    @pytest.mark.xfail(reason='our scheduler cannot list ended jobs yet')\n"
        "    def test_stop_is_idempotent(self, kit, new_job):\n"
        "        BackendConformance.test_stop_is_idempotent(self, kit, new_job)\n"
    )
    result = run(pytester, body)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["passed"] >= 30, outcomes
    result.stdout.fnmatch_lines(["*XPASS(strict)*our scheduler cannot list ended jobs yet*"])


HARNESS = """
from dispatch_testing.kit import Scenario
from dispatch_testing.simulated.harness import SimulatedHarness

class Partial(SimulatedHarness):
    def scenarios(self):
        return frozenset(Scenario) - {{Scenario.PREEMPTED, Scenario.OUT_OF_MEMORY}}
    def not_provokable(self):
        return {reasons}
"""


def test_kit_fails_a_declared_cause_with_no_scenario(pytester: pytest.Pytester) -> None:
    """A cause the backend declares it can report may not go untested in silence."""
    pytester.makepyfile(partial=HARNESS.format(reasons="{}"))
    body = "    from partial import Partial as harness_class\n"
    pytester.syspathinsert()
    result = run(pytester, body)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2 and outcomes["passed"] >= 29, outcomes
    result.stdout.fnmatch_lines(
        ["*declares what makes 'preempted' required, but its harness neither provokes*"]
    )


def test_kit_reports_a_not_provokable_scenario_as_xfailed_with_its_reason(
    pytester: pytest.Pytester,
) -> None:
    reasons = (
        "{Scenario.PREEMPTED: 'the test cluster has one partition', "
        "Scenario.OUT_OF_MEMORY: 'cgroup memory enforcement is off'}"
    )
    pytester.makepyfile(partial=HARNESS.format(reasons=reasons))
    pytester.syspathinsert()
    result = run(pytester, "    from partial import Partial as harness_class\n")
    outcomes = result.parseoutcomes()
    assert outcomes["xfailed"] == 2 and "failed" not in outcomes, outcomes
    result.stdout.fnmatch_lines(
        [
            "*XFAIL*test_scenario?preempted?*not provokable on simulated (offline): "
            "the test cluster has one partition*",
        ]
    )


def test_kit_is_inert_without_being_asked(pytester: pytest.Pytester) -> None:
    """The plugin is installed for every pytest run; without --dispatch-backend and
    without a kit class it collects and changes nothing."""
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)
    assert "dispatch kit" not in result.stdout.str()


def test_kit_names_a_backend_without_a_harness(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess("--dispatch-backend", "no-such-backend")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*no conformance harness is registered for the backend 'no-such-backend'*"]
    )


def test_kit_stops_when_the_harness_has_no_such_tier(pytester: pytest.Pytester) -> None:
    """Asking for a tier the harness does not have is an error, not a run of xfails."""
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess(
        "--dispatch-backend", "simulated", "--dispatch-live", "-p", "no:hypothesispytest"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the harness of 'simulated' has no live tier*"])


BROKEN_PLUGIN = """
from dispatch_testing.simulated.harness import SimulatedHarness

class NoStop:
    pass

class Hollow(SimulatedHarness):
    def plugin(self):
        return NoStop()
"""


def test_kit_fails_every_test_of_a_backend_that_does_not_load(pytester: pytest.Pytester) -> None:
    """S-31: a plugin that does not match the hook specs fails loudly, test by test."""
    pytester.makepyfile(hollow=BROKEN_PLUGIN)
    pytester.syspathinsert()
    result = run(pytester, "    from hollow import Hollow as harness_class\n")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 20 and "passed" not in outcomes, outcomes
    result.stdout.fnmatch_lines(["*the backend does not load*does not implement*"])
