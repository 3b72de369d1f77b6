"""A pure test bench for the core: a record in a list, discoveries written by hand, time
moved by the test. ``World.tick`` plays the supervisor: it appends what ``decide``
returns and records which side effects were asked for, without any scheduler."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from dispatch import (
    Action,
    Capability,
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    Execution,
    JobSpec,
    ObjectView,
    Phase,
    Plan,
    Provenance,
    RecoveryPolicy,
    Rule,
    decide,
    fold,
    project,
)
from dispatch.core.effects import Append, Effect, OpenGate, Stop, Submit
from dispatch.model.events import Event, JobCreated, SubmissionCreated

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def declarations(**overrides: object) -> Declarations:
    fields: dict[str, object] = {
        "name": "bench",
        "node_loss_window": timedelta(minutes=5),
        "reports": frozenset(CauseKind),
        "capabilities": frozenset({Capability.GATING}),
    }
    fields.update(overrides)
    return Declarations(**fields)  # type: ignore[arg-type]


def policy(*rules: tuple[Iterable[CauseKind], Action, int | None]) -> RecoveryPolicy:
    return RecoveryPolicy(rules=tuple(Rule(on=tuple(on), action=a, budget=b) for on, a, b in rules))


def cause(kind: CauseKind, at: datetime | None = None, **kw: object) -> Cause:
    prov = kw.pop(
        "provenance",
        Provenance.APPLICATION if kind is CauseKind.NON_ZERO_EXIT else Provenance.SCHEDULER,
    )
    return Cause(
        kind=kind, provenance=prov, detail=kw.pop("detail", f"{kind.value} here"), at=at or T0, **kw
    )  # type: ignore[arg-type]


class World:
    def __init__(
        self, pol: RecoveryPolicy, decl: Declarations | None = None, job_id: str = "job-1"
    ) -> None:
        self.decl = decl or declarations()
        self.plan = Plan.bind(pol, self.decl)
        self.job_id = job_id
        self.now = T0
        self.events: list[Event] = [
            JobCreated(
                job_id=job_id,
                seq=1,
                at=T0,
                name="train",
                backend=self.decl.name,
                spec=JobSpec(command=("python", "train.py")),
                plan=self.plan,
            )
        ]
        self.objects: dict[str, ObjectView] = {}
        self.submitted: list[Submit] = []
        self.stopped: list[Stop] = []
        self.opened: list[OpenGate] = []

    @property
    def job(self):  # type: ignore[no-untyped-def]
        return fold(self.events)

    def discovery(self) -> Discovery:
        return Discovery(backend=self.decl.name, at=self.now, objects=tuple(self.objects.values()))

    def status(self):  # type: ignore[no-untyped-def]
        return project(self.job, self.discovery(), self.now)

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def tick(self) -> list[Effect]:
        effects = decide(self.job, self.discovery(), self.plan, self.now)
        for effect in effects:
            if isinstance(effect, Append):
                assert effect.expected_version == self.events[-1].seq
                self.events.extend(effect.events)
            elif isinstance(effect, Submit):
                self.submitted.append(effect)
                oid = f"obj-{effect.submission}-{len(self.submitted)}"
                phase = Phase.GATED if effect.gated else Phase.PENDING
                self.objects[oid] = ObjectView(
                    object_id=oid,
                    job_id=self.job_id,
                    submission=effect.submission,
                    phase=phase,
                    scheduler_state=phase.value,
                    created_at=self.now,
                )
                seq = self.events[-1].seq + 1
                self.events.append(
                    SubmissionCreated(
                        job_id=self.job_id,
                        seq=seq,
                        at=self.now,
                        submission=effect.submission,
                        object_id=oid,
                    )
                )
            elif isinstance(effect, Stop):
                self.stopped.append(effect)
            elif isinstance(effect, OpenGate):
                self.opened.append(effect)
                self.set(effect.object_id, Phase.PENDING)
        return effects

    def current_object(self) -> str:
        return max(self.objects, key=lambda k: (self.objects[k].submission, k))

    def set(
        self,
        object_id: str,
        phase: Phase,
        c: Cause | None = None,
        executions: tuple[Execution, ...] | None = None,
    ) -> None:
        old = self.objects[object_id]
        self.objects[object_id] = old.model_copy(
            update={
                "phase": phase,
                "scheduler_state": phase.value,
                "cause": c,
                "executions": old.executions if executions is None else executions,
            }
        )

    def run_current(self) -> str:
        oid = self.current_object()
        self.set(oid, Phase.RUNNING)
        return oid

    def end_current(self, c: Cause) -> str:
        oid = self.current_object()
        self.set(oid, Phase.ENDED, c)
        return oid
