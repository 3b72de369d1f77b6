"""Deliberately broken adapters, each wrong in exactly one way, with their harnesses.

The kit's own tests register them through real entry points and check that the kit fails
the tests that name their fault, and only those.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from datetime import UTC, datetime
from typing import ClassVar

from dispatch import (
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    JobSpec,
    LogSelection,
    Phase,
    Provenance,
    Unreachable,
    hookimpl,
)
from dispatch.model.errors import NotAllowed
from dispatch_testing.kit.harness import MULTI_NODE_SCENARIOS, Scenario
from dispatch_testing.simulated.backend import CONTRACT, SimulatedBackend
from dispatch_testing.simulated.harness import SimulatedHarness
from dispatch_testing.simulated.scheduler import ExecRow, SchedulerDown, SimScheduler


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


class ShellScriptBackend(SimulatedBackend):
    """Runs every script through sh, whatever its own #! line says."""

    default_name = "runs-scripts-with-sh"

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        if spec.script is not None:
            spec = spec.model_copy(update={"script": "#!/bin/sh\n" + spec.script})
        return super().dispatch_submit(job_id, submission, spec, gated)


class IgnoresExclusionBackend(SimulatedBackend):
    """Declares exclude-nodes, then drops the nodes to keep off before submitting."""

    default_name = "ignores-exclude-nodes"

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        spec = spec.model_copy(update={"exclude_nodes": frozenset()})
        return super().dispatch_submit(job_id, submission, spec, gated)


class LastRankBackend(SimulatedBackend):
    """Takes the last task to end as the execution's cause: a rank killed in the wake."""

    default_name = "blames-the-last-rank"

    def _root(self, node_causes: tuple[Cause, ...]) -> Cause | None:
        never = datetime.min.replace(tzinfo=UTC)
        return max(node_causes, key=lambda c: c.at or never, default=None)


class NodeRankBackend(SimulatedBackend):
    """Gives every task its node's index as RANK: two tasks of a node share a rank."""

    default_name = "rank-per-node"
    contract: ClassVar[dict[str, str]] = {**CONTRACT, "RANK": "${SIM_NODEID}"}


class MixedLogsBackend(SimulatedBackend):
    """Serves what every submission of the job printed, whichever one was asked for."""

    default_name = "mixes-submissions-logs"

    @hookimpl
    def dispatch_logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        stream, node, rank = selection.stream.value, selection.node, selection.rank
        try:
            printed = b"".join(
                self.scheduler.output(row.object_id, stream, node=node, rank=rank)
                for row in self.scheduler.list([selection.job_id or ""])
            )
        except SchedulerDown as exc:
            raise Unreachable(str(exc)) from exc
        return [printed[selection.offset :]]


class UnlistedBackend(SimulatedBackend):
    """Tags its objects under a key its discovery does not filter by: it lists nothing."""

    default_name = "lists-nothing"

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        tags = {"job": job_id, SimScheduler.TAG_SUBMISSION: str(submission)}
        return self.scheduler.submit(tags, spec, hold=gated)


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
ShellScriptHarness = _harness(ShellScriptBackend)
IgnoresExclusionHarness = _harness(IgnoresExclusionBackend)
LastRankHarness = _harness(LastRankBackend)
NodeRankHarness = _harness(NodeRankBackend)
MixedLogsHarness = _harness(MixedLogsBackend)
UnlistedHarness = _harness(UnlistedBackend)


class OldHooksBackend:
    """Not broken: an adapter written against last month's hook set and docs (declare,
    discover, submit, stop; capabilities: none), before ``exclude_nodes`` existed. Its
    submit hands the scheduler the spec as it comes and checks for nothing it does not
    declare (nodes, GPUs, a time limit, ``exclude_nodes``, ``gated``): the core refuses
    such a job before any hook is called, so the adapter is never asked."""

    def __init__(self, scheduler: SimScheduler | None = None, name: str = "old-hooks") -> None:
        self.name = name
        self.scheduler = scheduler or SimScheduler()
        self._mapping = SimulatedBackend(scheduler, name=name)  # discovery and stop only

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        simulated = self._mapping.dispatch_declare()
        return Declarations(
            name=self.name,
            node_loss_window=simulated.node_loss_window,
            pending_windows=simulated.pending_windows,
            reports=simulated.reports,
        )

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        return self._mapping.dispatch_discover(job_ids)

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        tags = {SimScheduler.TAG_JOB: job_id, SimScheduler.TAG_SUBMISSION: str(submission)}
        try:
            return self.scheduler.submit(tags, spec)
        except SchedulerDown as exc:
            raise Unreachable(str(exc)) from exc

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        self._mapping.dispatch_stop(object_id, cause)


class OldHooksHarness(SimulatedHarness):
    def plugin(self) -> object:
        return OldHooksBackend(self.scheduler, name=self.name)

    def scenarios(self) -> Set[Scenario]:
        # no multi-node capability and no native actions declared
        return frozenset(Scenario) - MULTI_NODE_SCENARIOS - {Scenario.NATIVE_RECOVERY}


#: entry-point name -> (backend class, harness class)
BROKEN = {
    "misclassifies": ("MisclassifyingBackend", "MisclassifyingHarness"),
    "paraphrases": ("ParaphrasingBackend", "ParaphrasingHarness"),
    "swallows-unreachable": ("SwallowingBackend", "SwallowingHarness"),
    "fussy-stop": ("FussyStopBackend", "FussyStopHarness"),
    "per-job": ("PerJobBackend", "PerJobHarness"),
    "runs-scripts-with-sh": ("ShellScriptBackend", "ShellScriptHarness"),
    "ignores-exclude-nodes": ("IgnoresExclusionBackend", "IgnoresExclusionHarness"),
    "blames-the-last-rank": ("LastRankBackend", "LastRankHarness"),
    "rank-per-node": ("NodeRankBackend", "NodeRankHarness"),
    "mixes-submissions-logs": ("MixedLogsBackend", "MixedLogsHarness"),
    "lists-nothing": ("UnlistedBackend", "UnlistedHarness"),
    "old-hooks": ("OldHooksBackend", "OldHooksHarness"),
}
