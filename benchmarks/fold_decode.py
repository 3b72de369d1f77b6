"""Decode + fold throughput against json.loads of the same bytes.

Target (README, Scale): >= 200k events/s, and <= 1.5x the time json.loads takes on the same
bytes, decoding as strictly as before (S-6). Two decoders are measured on the same rows:
``decode_event`` (pydantic, every row validated whole) and the store's row codec
(``dispatch.store.codec.decode_body``: a tail seen before is not validated again), with
the cyclic collector on (as before) and kept out (``collector_paused``). The codec's caches
are emptied before every measured pass, as in a supervisor that just started: the figure
is a cold start's, on a record of many jobs (every job's object ids differ; specs, plans,
causes and tick times repeat). Also shown: the same pass with the caches warm, and with
them emptied before every job (nothing ever seen before: the codec's worst case).
Run: python benchmarks/fold_decode.py [--jobs 5000] [--wall]

Times are this process's CPU time (best of 5) unless ``--wall``: the machine is shared,
and wall time measures the neighbours as much as the fold. The inputs are moved out of
the garbage collector's reach (``gc.freeze``) once built: otherwise a full collection
scanning megabytes of input lands inside one measurement and not another, and the
figures say more about where it fell than about the code.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from datetime import UTC, datetime, timedelta

from dispatch import (
    Action,
    Capability,
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    JobSpec,
    ObjectView,
    Phase,
    Plan,
    Provenance,
    RecoveryPolicy,
    Rule,
    decide,
    fold,
)
from dispatch.core.effects import Append, OpenGate, Submit
from dispatch.core.folding import forget as forget_transitions
from dispatch.model.events import Event, JobCreated, SubmissionCreated, decode_event, encode_event
from dispatch.store.codec import collector_paused, decode_body, forget

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def one_record() -> list[str]:
    """One job's record as a supervisor writes it: submitted, preempted and resubmitted six
    times, then submitted once more; the events come from the pure core's ``decide`` on
    discoveries made up here (no scheduler)."""
    declared = Declarations(
        name="bench",
        node_loss_window=timedelta(minutes=5),
        reports=frozenset(CauseKind),
        capabilities=frozenset({Capability.GATING}),
    )
    rule = Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=10)
    plan = Plan.bind(RecoveryPolicy(rules=(rule,)), declared)
    spec = JobSpec(command=("python", "train.py"))
    events: list[Event] = [
        JobCreated(
            job_id="job-1", seq=1, at=T0, name="train", backend="bench", spec=spec, plan=plan
        )
    ]
    objects: dict[str, ObjectView] = {}

    def tick() -> None:
        discovery = Discovery(backend="bench", at=T0, objects=tuple(objects.values()))
        for effect in decide(fold(events), discovery, plan, T0):
            if isinstance(effect, Append):
                events.extend(effect.events)
            elif isinstance(effect, Submit):
                oid = f"obj-{effect.submission}-{len(objects) + 1}"
                phase = Phase.GATED if effect.gated else Phase.PENDING
                objects[oid] = ObjectView(
                    object_id=oid,
                    job_id="job-1",
                    submission=effect.submission,
                    phase=phase,
                    scheduler_state=phase.value,
                    created_at=T0,
                )
                events.append(
                    SubmissionCreated(
                        job_id="job-1",
                        seq=events[-1].seq + 1,
                        at=T0,
                        submission=effect.submission,
                        object_id=oid,
                    )
                )
            elif isinstance(effect, OpenGate):
                set_phase(effect.object_id, Phase.PENDING)

    def set_phase(oid: str, phase: Phase, cause: Cause | None = None) -> None:
        objects[oid] = objects[oid].model_copy(
            update={"phase": phase, "scheduler_state": phase.value, "cause": cause}
        )

    def current() -> str:
        return max(objects, key=lambda k: (objects[k].submission, k))

    preempted = Cause(
        kind=CauseKind.PREEMPTED, provenance=Provenance.SCHEDULER, detail="preempted here", at=T0
    )
    for _ in range(6):
        tick()
        set_phase(current(), Phase.RUNNING)
        set_phase(current(), Phase.ENDED, preempted)
        tick()
    tick()
    return [encode_event(e) for e in events]


CLOCK = time.process_time


def best(fn, repeat: int = 5, cold: bool = True) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        if cold:
            forget()
            forget_transitions()
        t = CLOCK()
        fn()
        times.append(CLOCK() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    template = one_record()
    records = [
        [row.replace("job-1", f"job-{n}").replace("obj-1-", f"obj-{n}-") for row in template]
        for n in range(args.jobs)
    ]
    decoded = [[decode_event(row) for row in r] for r in records]
    gc.collect()
    gc.freeze()
    total = sum(len(r) for r in records)
    nbytes = sum(len(row) for r in records for row in r)

    t_json = best(lambda: [[json.loads(row) for row in r] for r in records])
    t_decode = best(lambda: [[decode_event(row) for row in r] for r in records])
    t_fold = best(lambda: [fold(r) for r in decoded])
    t_both = best(lambda: [fold([decode_event(row) for row in r]) for r in records])
    t_codec = best(lambda: [[decode_body(row) for row in r] for r in records])
    t_codec_fold = best(lambda: [fold([decode_body(row) for row in r]) for r in records])

    def paused() -> None:
        with collector_paused(freeze_over=None):
            [fold([decode_body(row) for row in r]) for r in records]

    def cold() -> None:
        with collector_paused(freeze_over=None):
            for r in records:
                forget()
                forget_transitions()
                fold([decode_body(row) for row in r])

    t_paused = best(paused)
    t_warm = best(paused, cold=False)
    t_cold = best(cold)
    gc.unfreeze()
    # the codec's events are the decoder's, field for field
    assert [[decode_body(row) for row in r] for r in records[:50]] == decoded[:50]

    print(
        f"target: 'codec + fold, gc paused' >= 200,000 events/s and <= 1.50x json.loads; "
        f"{CLOCK.__name__}, best of 5"
    )
    print(
        f"{args.jobs} records, {total} events ({total / args.jobs:.0f} per job), "
        f"{nbytes / 1e6:.1f} MB of JSON; load average {os.getloadavg()[0]:.1f} (2 cores)"
    )
    rows = [
        ("json.loads only", t_json),
        ("decode (pydantic)", t_decode),
        ("fold only", t_fold),
        ("decode + fold (before)", t_both),
        ("codec decode", t_codec),
        ("codec + fold", t_codec_fold),
        ("codec + fold, gc paused", t_paused),
        ("  same, caches warm", t_warm),
        ("  same, nothing cached", t_cold),
    ]
    for label, took in rows:
        print(
            f"{label:<28} {total / took:>10,.0f} events/s  ({took:.3f} s, "
            f"{took / t_json:.2f}x json.loads)"
        )


if __name__ == "__main__":
    main()
