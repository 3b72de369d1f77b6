"""The core supervisor on the backend, end to end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from dispatch import Capability, CauseKind

from dispatch_testing.kit.harness import NotProvokable, Scenario
from dispatch_testing.kit.suite.support import not_provokable
from dispatch_testing.kit.view import Kit


class SupervisedTests:
    def test_supervisor_applies_the_policy_end_to_end(
        self, kit: Kit, new_job: Callable[[], str], tmp_path: Any
    ) -> None:
        """S-12, S-13, S-14, S-16: the core supervisor on this backend, with a policy that
        resubmits on ``preempted`` (budget 1) and holds on ``non-zero-exit``: a preemption
        (when the backend can report one) is resubmitted and spends only its own budget;
        the next submission's non-zero exit puts the job on a recovery hold."""
        from dispatch import Action, RecoveryPolicy, Registry, Rule, State
        from dispatch.job_records import create_job, load_job, status_of
        from dispatch.store import open_store
        from dispatch.supervisor import Supervisor

        from dispatch_testing.provoking import ProvokingPlugin

        reasons, provokable = kit.harness.not_provokable(), kit.harness.scenarios()
        wanted = [Scenario.EXIT_NONZERO]
        if Scenario.PREEMPTED in provokable and Scenario.PREEMPTED not in reasons:
            # test_scenario[preempted] already fails a declared preemption nobody provokes
            wanted.insert(0, Scenario.PREEMPTED)
        if Scenario.EXIT_NONZERO in reasons:
            not_provokable(kit, NotProvokable(reasons[Scenario.EXIT_NONZERO]))
        if Scenario.EXIT_NONZERO not in provokable:
            pytest.fail("the harness cannot provoke exit-nonzero", pytrace=False)
        script = dict(enumerate(wanted, start=1))
        plugin = ProvokingPlugin(kit.harness, kit.backend, script)
        registry = Registry.from_plugins({kit.name: plugin})
        store = open_store(f"sqlite:///{tmp_path}/record.db")
        policy = RecoveryPolicy(
            rules=(
                Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=1),
                Rule(on=(CauseKind.NON_ZERO_EXIT,), action=Action.HOLD),
            )
        )
        job_id = new_job()
        create_job(
            store,
            registry,
            backend=kit.name,
            spec=kit.harness.long_spec(),
            policy=policy,
            job_id=job_id,
            now=kit.now(),
        )
        supervisor = Supervisor(store, registry, owner="dispatch-kit", clock=kit.now)
        waited, limit = 0.0, kit.harness.timeout * (len(wanted) + 1)
        first_submit: float | None = None
        try:
            while True:
                supervisor.tick(kit.now())
                job = load_job(store, job_id)
                if job.hold is not None or job.outcome is not None:
                    break
                if plugin.provoked and first_submit is None:
                    first_submit = waited
                if (
                    first_submit is not None
                    and waited - first_submit >= kit.harness.listing_grace
                    and not kit.objects(job_id)
                ):
                    kit.fail_unlisted([job_id], waited - first_submit)
                if waited > limit:
                    pytest.fail(f"after {waited:.0f}s the job is neither held nor ended: {job}")
                kit.harness.wait(kit.harness.poll_interval)
                waited += kit.harness.poll_interval
        except NotProvokable as exc:
            not_provokable(kit, exc)
        assert job.outcome is None, f"the job ended {job.outcome} instead of being held"
        assert job.hold is not None and job.hold.rule == 1, f"held by {job.hold}"
        assert job.hold.cause.kind is CauseKind.NON_ZERO_EXIT
        assert job.hold.cause.exit_code == plugin.provoked[len(wanted)].exit_code
        assert [s.number for s in job.submissions] == list(range(1, len(wanted) + 1))
        preempted = 1 if Scenario.PREEMPTED in wanted else 0
        assert job.spent.get(0, 0) == preempted, f"budgets spent: {job.spent}"
        if Capability.GATING not in kit.declarations.capabilities:
            assert plugin.gate_calls == [], (
                f"dispatch opened gates {plugin.gate_calls} of a backend without gating: "
                "such a backend may leave dispatch_open_gate out"
            )
        status = status_of(store, registry, job_id, now=kit.now())
        assert status.state is State.HELD
        assert status.cause is not None and status.cause.kind is CauseKind.NON_ZERO_EXIT
