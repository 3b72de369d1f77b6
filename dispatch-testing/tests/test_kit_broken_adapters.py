"""The kit catches broken adapters, each by the test that names its fault (and no other).

Each adapter is a real distribution for the run: a ``*.dist-info`` with its entry points
is put on ``sys.path`` of an in-process pytest session, which runs the kit with
``--dispatch-backend NAME`` exactly as ``dispatch-conformance NAME`` does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent
ADAPTERS = (HERE / "kit_broken_adapters.py").read_text()


def install(pytester: pytest.Pytester, entry_points: str, module: str = ADAPTERS) -> None:
    """Make a tiny installed distribution registered only by its entry points."""
    pytester.makepyfile(kit_broken_adapters=module)
    info = pytester.mkdir("kit_broken_adapters-0.1.dist-info")
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: kit-broken-adapters\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(entry_points)
    pytester.syspathinsert()
    pytester.makeini("[pytest]\nxfail_strict = true\n")


def register(name: str, backend: str, harness: str) -> str:
    return (
        f"[dispatch.backends]\n{name} = kit_broken_adapters:{backend}\n"
        f"[dispatch.harnesses]\n{name} = kit_broken_adapters:{harness}\n"
    )


def failed_tests(result: pytest.RunResult) -> set[str]:
    _, _, failed = result.reprec.listoutcomes()  # type: ignore[attr-defined]
    return {report.nodeid.split("::")[-1] for report in failed}


def run_kit(pytester: pytest.Pytester, name: str, backend: str, harness: str) -> pytest.RunResult:
    install(pytester, register(name, backend, harness))
    return pytester.runpytest_inprocess(
        "--dispatch-backend", name, "-p", "no:cacheprovider", "-p", "no:hypothesispytest"
    )


def test_kit_passes_the_simulated_backend(pytester: pytest.Pytester) -> None:
    """S-30: the simulated scheduler's adapter passes every kit test (the control)."""
    pytester.makeini("[pytest]\nxfail_strict = true\n")
    result = pytester.runpytest_inprocess(
        "--dispatch-backend", "simulated", "-p", "no:hypothesispytest"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 20 and "failed" not in outcomes, outcomes
    assert failed_tests(result) == set()


@pytest.mark.parametrize(
    ("name", "backend", "harness", "expected"),
    [
        pytest.param(
            "misclassifies",
            "MisclassifyingBackend",
            "MisclassifyingHarness",
            {
                "test_scenario[preempted]",
                "test_scenario[native-recovery]",
                "test_supervisor_applies_the_policy_end_to_end",
            },
            id="misclassifies",
        ),
        pytest.param(
            "paraphrases",
            "ParaphrasingBackend",
            "ParaphrasingHarness",
            {
                f"test_scenario[{s}]"
                for s in (
                    "time-limit",
                    "preempted",
                    "node-lost",
                    "out-of-memory",
                    "launch-failed",
                    "no-capacity",
                    "cancelled-by-scheduler",
                    "held-by-scheduler",
                    "unmappable",
                )
            },
            id="paraphrases-detail",
        ),
        pytest.param(
            "swallows-unreachable",
            "SwallowingBackend",
            "SwallowingHarness",
            {"test_unreachable_raises_never_a_state"},
            id="swallows-unreachable",
        ),
        pytest.param(
            "fussy-stop",
            "FussyStopBackend",
            "FussyStopHarness",
            {"test_stop_is_idempotent", "test_stopping_an_ended_object_keeps_its_ending"},
            id="stop-not-idempotent",
        ),
        pytest.param(
            "per-job",
            "PerJobBackend",
            "PerJobHarness",
            {"test_discovery_costs_constant_calls"},
            id="discovers-per-job",
        ),
        pytest.param(
            "runs-scripts-with-sh",
            "ShellScriptBackend",
            "ShellScriptHarness",
            {"test_script_runs_by_its_own_interpreter"},
            id="runs-scripts-with-sh",
        ),
        pytest.param(
            "ignores-exclude-nodes",
            "IgnoresExclusionBackend",
            "IgnoresExclusionHarness",
            {"test_capability[exclude-nodes-declared]"},
            id="ignores-exclude-nodes",
        ),
        pytest.param(
            "blames-the-last-rank",
            "LastRankBackend",
            "LastRankHarness",
            {
                "test_scenario[multi-node-node-lost]",
                "test_scenario[multi-node-rank-failed]",
                "test_capability[exclude-nodes-declared]",
            },
            id="blames-a-rank-killed-in-the-wake",
        ),
        pytest.param(
            "rank-per-node",
            "NodeRankBackend",
            "NodeRankHarness",
            {"test_capability[multi-node-declared]"},
            id="breaks-the-launch-contract",
        ),
        pytest.param(
            "mixes-submissions-logs",
            "MixedLogsBackend",
            "MixedLogsHarness",
            {"test_capability[logs-declared]"},
            id="mixes-submissions-logs",
        ),
    ],
)
def test_kit_fails_a_broken_adapter_on_the_right_tests(
    pytester: pytest.Pytester, name: str, backend: str, harness: str, expected: set[str]
) -> None:
    """S-4, S-5, S-30, S-32, S-41, S-42, S-43, S-46: each deliberately broken adapter
    fails exactly the kit tests about its fault; everything it does right still passes."""
    result = run_kit(pytester, name, backend, harness)
    assert failed_tests(result) == expected, result.stdout.str()[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 20 and "error" not in outcomes, outcomes


def test_kit_passes_an_adapter_written_against_the_old_hook_set(
    pytester: pytest.Pytester,
) -> None:
    """S-28, S-30, S-36: an adapter from before ``exclude_nodes`` (capabilities: none,
    the four required hooks, a submit that checks for nothing it does not declare)
    passes the whole kit: each undeclared capability is refused by the core, never handed
    to the adapter, so a capability added later changes no verdict."""
    result = run_kit(pytester, "old-hooks", "OldHooksBackend", "OldHooksHarness")
    assert failed_tests(result) == set(), result.stdout.str()[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 20 and "error" not in outcomes, outcomes
    passed, _, _ = result.reprec.listoutcomes()  # type: ignore[attr-defined]
    names = {report.nodeid.split("::")[-1] for report in passed}
    refused = {f"test_capability[{c}-refused]" for c in ("exclude-nodes", "gpus", "gating")}
    assert refused <= names, sorted(names)


def test_kit_failure_says_what_was_misclassified(pytester: pytest.Pytester) -> None:
    """S-4: the misclassification report names the kind expected and the kind given."""
    result = run_kit(pytester, "misclassifies", "MisclassifyingBackend", "MisclassifyingHarness")
    result.stdout.fnmatch_lines(["*preempted: misclassified as non-zero-exit, expected preempted*"])


def test_kit_reports_unreachable_swallowed_into_an_answer(pytester: pytest.Pytester) -> None:
    """S-5: the failure names the call that answered instead of raising Unreachable."""
    result = run_kit(pytester, "swallows-unreachable", "SwallowingBackend", "SwallowingHarness")
    result.stdout.fnmatch_lines(["*answered instead of raising Unreachable*discover*"])


@pytest.mark.parametrize(
    ("name", "backend", "harness", "words"),
    [
        (
            "runs-scripts-with-sh",
            "ShellScriptBackend",
            "ShellScriptHarness",
            "*the Python script ended non-zero-exit (exit 2*not through sh*",
        ),
        (
            "ignores-exclude-nodes",
            "IgnoresExclusionBackend",
            "IgnoresExclusionHarness",
            "*submission 2 excluded *sim-node-002* and runs on *sim-node-002* (S-43)*",
        ),
        (
            "blames-the-last-rank",
            "LastRankBackend",
            "LastRankHarness",
            "*root cause of its tasks' endings is 'non-zero-exit'*killed in its wake*",
        ),
        (
            "rank-per-node",
            "NodeRankBackend",
            "NodeRankHarness",
            "*rank 1's task says RANK=0*",
        ),
        (
            "mixes-submissions-logs",
            "MixedLogsBackend",
            "MixedLogsHarness",
            "*the logs of submission 1 hold submission 2's*",
        ),
    ],
)
def test_kit_failure_names_the_fault(
    pytester: pytest.Pytester, name: str, backend: str, harness: str, words: str
) -> None:
    """S-41, S-42, S-43, S-46: the report says what is wrong in the adapter's terms."""
    result = run_kit(pytester, name, backend, harness)
    result.stdout.fnmatch_lines([words])


def test_kit_fails_a_discovery_that_lists_nothing_fast(pytester: pytest.Pytester) -> None:
    """S-30, S-34: an adapter whose discovery never lists what it just
    submitted fails each test after Harness.listing_grace (10 s of the harness's time),
    never after the 600 s timeout meant for slow schedulers."""
    result = run_kit(pytester, "lists-nothing", "UnlistedBackend", "UnlistedHarness")
    text = result.stdout.str()
    failed = failed_tests(result)
    assert len(failed) >= 25, failed
    assert text.count("nothing listed for kit-") >= len(failed) - 2, text[-3000:]
    assert "10s after it was submitted (Harness.listing_grace = 10s)" in text
    assert "after 600s still not" not in text and "after 120s still not" not in text
