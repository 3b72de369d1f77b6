"""An unreachable scheduler raises, never answers (S-5)."""

from __future__ import annotations

from collections.abc import Callable

from dispatch import Capability, LogSelection, Unreachable

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.suite.support import STOP, alive, find_object, not_provokable
from dispatch_testing.kit.view import Kit


class UnreachableTests:
    def test_unreachable_raises_never_a_state(self, kit: Kit, new_job: Callable[[], str]) -> None:
        """S-5: every call that needs an unreachable scheduler raises Unreachable; none
        answers with a state, an empty listing or a silent success."""
        job = new_job()
        object_id = kit.backend.submit(job, 1, kit.harness.long_spec(), False)
        kit.wait_for(job, alive, "listed alive")
        try:
            with kit.harness.unreachable():
                calls: dict[str, Callable[[], object]] = {
                    "discover": lambda: kit.backend.discover([job]),
                    "submit": lambda: kit.backend.submit(job, 2, kit.harness.long_spec(), False),
                    "stop": lambda: kit.backend.stop(object_id, STOP),
                }
                if Capability.GATING in kit.declarations.capabilities:
                    calls["open_gate"] = lambda: kit.backend.open_gate(object_id)
                if Capability.LOGS in kit.declarations.capabilities:
                    calls["logs"] = lambda: list(
                        kit.backend.logs(object_id, LogSelection().of(job, 1))
                    )
                answered = {}
                for what, call in calls.items():
                    try:
                        answered[what] = call()
                    except Unreachable:
                        continue
        except NotProvokable as exc:
            not_provokable(kit, exc)
        assert not answered, (
            f"with the scheduler unreachable these calls answered instead of raising "
            f"Unreachable: {answered}"
        )
        assert find_object(kit.objects(job), object_id) is not None, (
            "reachable again, the object is back"
        )
