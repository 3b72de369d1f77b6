"""Stop, and the gate a gated submission waits behind."""

from __future__ import annotations

from collections.abc import Callable

from dispatch import CauseKind, Phase

from dispatch_testing.kit.suite.support import STOP, alive, find_object
from dispatch_testing.kit.view import Kit


class StopTests:
    def test_stop_is_idempotent(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-30: stop ends the object; stopping it again, and again once ended, is not an
        error. What stays listed ends as cancelled."""
        job = new_job()
        object_id = kit.backend.submit(job, 1, kit.harness.long_spec(), False)
        kit.wait_for(job, lambda objs: any(o.phase is Phase.RUNNING for o in objs), "running")
        kit.backend.stop(object_id, STOP)
        kit.backend.stop(object_id, STOP)
        objects = kit.wait_for(job, lambda objs: not alive(objs), "ended after stop")
        obj = find_object(objects, object_id)
        if obj is not None:
            assert obj.cause is not None and obj.cause.kind is CauseKind.CANCELLED, (
                f"a stopped object ends cancelled, not {obj.cause}"
            )
        kit.backend.stop(object_id, STOP)

    def test_stopping_an_ended_object_keeps_its_ending(
        self, kit: Kit, new_job: Callable[[], str]
    ) -> None:
        """S-30: stopping an object that already ended is not an error and does not
        rewrite how it ended."""
        job = new_job()
        object_id = kit.backend.submit(job, 1, kit.harness.quick_spec(), False)
        objects = kit.wait_for(job, lambda objs: bool(objs) and not alive(objs), "ended")
        before = find_object(objects, object_id)
        assert before is not None and before.cause is not None
        kit.backend.stop(object_id, STOP)
        after = find_object(kit.objects(job), object_id)
        if after is not None:
            assert after.cause is not None and after.cause.kind is before.cause.kind, (
                f"stop rewrote an ended object's cause: {before.cause} -> {after.cause}"
            )


def check_gate(kit: Kit, job: str, object_id: str) -> None:
    """Gated: shows gated and never starts until opened; then released, then runs."""
    objects = kit.wait_for(job, lambda objs: bool(objs), "listed")
    for _ in range(3):
        obj = find_object(objects, object_id)
        assert obj is not None and obj.phase is Phase.GATED, (
            f"a gated object must show phase gated until its gate opens: {obj}"
        )
        assert all(e.started_at is None for e in obj.executions), "a gated object started"
        kit.harness.wait(kit.harness.poll_interval)
        objects = kit.objects(job)
    kit.backend.open_gate(object_id)
    kit.backend.open_gate(object_id)  # idempotent
    kit.wait_for(
        job,
        lambda objs: any(o.phase is Phase.RUNNING for o in objs),
        "running after its gate opened",
        wrong=lambda objs: "ended instead of running" if not alive(objs) else None,
    )
