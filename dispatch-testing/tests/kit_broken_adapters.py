"""Deliberately broken adapters, each wrong in exactly one way, with their harnesses.

The kit's own tests register them through real entry points and check that the kit fails
the tests that name their fault, and only those.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dispatch import (
    Cause,
    CauseKind,
    Discovery,
    Phase,
    Provenance,
    Unreachable,
    hookimpl,
)
from dispatch.errors import NotAllowed
from dispatch_testing.simulated.backend import SimulatedBackend
from dispatch_testing.simulated.harness import SimulatedHarness
from dispatch_testing.simulated.scheduler import ExecRow, SchedulerDown


class MisclassifyingBackend(SimulatedBackend):
    """Reads a preemption as the application's non-zero exit: the guess S-4 forbids."""

    default_name = "misclassifies"

    def _map(
        self,
        state: str,
        reason: str,
        exit_code: int | None,
        last: ExecRow,
        since: datetime | None,
    ) -> tuple[Phase, Cause | None]:
        phase, cause = super()._map(state, reason, exit_code, last, since)
        if state == "PREEMPTED" and cause is not None:
            cause = cause.model_copy(
                update={
                    "kind": CauseKind.NON_ZERO_EXIT,
                    "provenance": Provenance.APPLICATION,
                    "exit_code": 1,
                }
            )
        return phase, cause


class ParaphrasingBackend(SimulatedBackend):
    """Tidies the scheduler's words into its own: S-2 wants them verbatim."""

    default_name = "paraphrases"

    def _map(
        self,
        state: str,
        reason: str,
        exit_code: int | None,
        last: ExecRow,
        since: datetime | None,
    ) -> tuple[Phase, Cause | None]:
        phase, cause = super()._map(state, reason, exit_code, last, since)
        if cause is not None and cause.provenance is not Provenance.APPLICATION:
            cause = cause.model_copy(update={"detail": f"the scheduler reports {cause.kind}"})
        return phase, cause


class SwallowingBackend(SimulatedBackend):
    """Turns an unreachable scheduler into an empty listing instead of raising."""

    default_name = "swallows-unreachable"

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        try:
            return super().dispatch_discover(job_ids)
        except Unreachable:
            return Discovery(backend=self.name, at=self.scheduler.now())


class FussyStopBackend(SimulatedBackend):
    """Refuses to stop an object that is not running any more."""

    default_name = "fussy-stop"

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        try:
            state = self.scheduler.state_of(object_id)
        except SchedulerDown as exc:
            raise Unreachable(str(exc)) from exc
        if state not in ("PENDING", "GATED", "HELD", "RUNNING"):
            raise NotAllowed(f"object {object_id} is {state}, it cannot be stopped")
        super().dispatch_stop(object_id, cause)


class PerJobBackend(SimulatedBackend):
    """Asks the scheduler once per job id: O(N) calls for N jobs."""

    default_name = "per-job"

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        objects = []
        for job_id in job_ids:
            objects.extend(super().dispatch_discover([job_id]).objects)
        return Discovery(backend=self.name, at=self.scheduler.now(), objects=tuple(objects))


def _harness(backend: type[SimulatedBackend]) -> type[SimulatedHarness]:
    class BrokenHarness(SimulatedHarness):
        def plugin(self) -> object:
            return backend(self.scheduler, name=self.name)

    BrokenHarness.__qualname__ = BrokenHarness.__name__ = f"{backend.__name__}Harness"
    return BrokenHarness


MisclassifyingHarness = _harness(MisclassifyingBackend)
ParaphrasingHarness = _harness(ParaphrasingBackend)
SwallowingHarness = _harness(SwallowingBackend)
FussyStopHarness = _harness(FussyStopBackend)
PerJobHarness = _harness(PerJobBackend)

#: entry-point name -> (backend class, harness class)
BROKEN = {
    "misclassifies": ("MisclassifyingBackend", "MisclassifyingHarness"),
    "paraphrases": ("ParaphrasingBackend", "ParaphrasingHarness"),
    "swallows-unreachable": ("SwallowingBackend", "SwallowingHarness"),
    "fussy-stop": ("FussyStopBackend", "FussyStopHarness"),
    "per-job": ("PerJobBackend", "PerJobHarness"),
}
