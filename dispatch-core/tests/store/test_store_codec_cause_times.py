"""The row codec remembers a tail carrying a cause without the cause's time (every job's
recoveries and holds differ in little else), and decodes exactly as strictly as
``decode_event`` all the same (S-6).

Each test first lets the codec see valid rows of the shape, so that a later row differing
only where the danger is would be served from the cache if the codec were too trusting.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from dispatch.core.cause import Cause
from dispatch.model.enums import Action, CauseKind, Enforcer, Provenance, State
from dispatch.model.errors import DecodeError
from dispatch.model.events import (
    CancelRequested,
    EscalationRaised,
    Event,
    HoldPlaced,
    Identity,
    OutcomeCommitted,
    RecoveryStarted,
    SubmissionFailed,
    decode_event,
    encode_event,
)
from dispatch.store.base import UndecodableRow, decode_row
from dispatch.store.codec import decode_body, forget

T0 = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def empty_caches():
    forget()
    yield
    forget()


def _cause(at: datetime | None, detail: str = "exited with code 1") -> Cause:
    return Cause(
        kind=CauseKind.NON_ZERO_EXIT,
        provenance=Provenance.APPLICATION,
        detail=detail,
        exit_code=1,
        at=at,
    )


def _recovery(job: str, n: int, detail: str = "exited with code 1") -> RecoveryStarted:
    return RecoveryStarted(
        job_id=job,
        seq=4,
        at=T0 + timedelta(seconds=n, microseconds=7 * n),
        submission=1,
        rule=0,
        action=Action.RESUBMIT,
        enforcer=Enforcer.SUPERVISOR,
        cause=_cause(T0 + timedelta(seconds=n, microseconds=3 * n), detail),
    )


def _same(got: Event, want: Event) -> None:
    assert got == want
    assert type(got) is type(want)
    assert list(got.__dict__) == list(want.__dict__)  # same field order: same dump, same repr
    assert got.model_fields_set == want.model_fields_set
    cause, wanted = getattr(got, "cause", None), getattr(want, "cause", None)
    if wanted is not None:
        assert cause is not None
        assert list(cause.__dict__) == list(wanted.__dict__)
        assert cause.model_fields_set == wanted.model_fields_set
        assert cause.at == wanted.at
        if wanted.at is not None:
            assert cause.at is not None and cause.at.utcoffset() == wanted.at.utcoffset()
    assert encode_event(got) == encode_event(want)


def test_rows_differing_in_their_times_decode_as_the_decoder_does_S6():
    rows = [encode_event(_recovery(f"job-{n}", n)) for n in range(6)]
    got = [decode_body(r) for r in rows]
    for g, r in zip(got, rows, strict=True):
        _same(g, decode_event(r))
    # served from the remembered tail: one fields-set for the cause, not decoded again
    assert got[2].cause.__pydantic_fields_set__ is got[4].cause.__pydantic_fields_set__
    assert len({id(g.cause) for g in got}) == len(got)  # each its own time


def test_a_cause_time_in_another_offset_keeps_its_offset_S6():
    for n in range(2):
        decode_body(encode_event(_recovery(f"job-{n}", n)))
    plus2 = timezone(timedelta(hours=2))
    event = _recovery("job-x", 9).model_copy(
        update={"cause": _cause(datetime(2026, 3, 1, 14, 0, 0, tzinfo=plus2))}
    )
    row = encode_event(event)
    _same(decode_body(row), decode_event(row))


@pytest.mark.parametrize(
    "bad_time",
    [
        "2026-03-01T12:00:05",  # no offset: the field wants an aware time
        "2026-13-01T12:00:05Z",  # no 13th month
        "2026-03-01T25:00:05Z",
        "2026-03-01T12:00:05+25:00",
    ],
    ids=["naive", "month-13", "hour-25", "offset-25h"],
)
def test_a_cause_time_the_decoder_refuses_is_refused_beside_a_known_tail_S6(bad_time):
    for n in range(3):
        decode_body(encode_event(_recovery(f"job-{n}", n)))
    good = encode_event(_recovery("job-c", 5))
    text = good.split('"at":"')[2].split('"')[0]  # the second time: the cause's
    bad = good.replace(f'"at":"{text}"', f'"at":"{bad_time}"', 1)
    assert bad != good and bad.count(bad_time) == 1
    with pytest.raises(DecodeError):
        decode_event(bad)
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-c", 4, bad)
    assert "job 'job-c'" in str(err.value) and "seq 4" in str(err.value)
    assert err.value.field.split(".")[-1] == "at"


def test_a_detail_that_spells_a_time_field_is_not_taken_for_the_cause_time_S6():
    tricky = 'said "at":"2026-03-01T12:00:05Z" and \\ left'
    for n in range(3):
        decode_body(encode_event(_recovery(f"job-{n}", n, tricky)))
    row = encode_event(_recovery("job-c", 7, tricky))
    got = decode_body(row)
    _same(got, decode_event(row))
    assert got.cause.detail == tricky


def test_a_changed_field_of_the_cause_is_refused_beside_a_known_tail_S6():
    for n in range(3):
        decode_body(encode_event(_recovery(f"job-{n}", n)))
    good = encode_event(_recovery("job-c", 5))
    bad = good.replace('"exit_code":1', '"exit_code":"one"', 1)
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-c", 4, bad)
    assert err.value.field.split(".")[-1] == "exit_code"


_BASES = [
    Cause(kind=CauseKind.NON_ZERO_EXIT, provenance=Provenance.APPLICATION, exit_code=1),
    Cause(
        kind=CauseKind.PREEMPTED,
        provenance=Provenance.SCHEDULER,
        actor="alice",
        detail='a "quoted" \\ detail\n',
        exit_code=-9,
        nodes=("n1", "n2"),
        rank=3,
    ),
    Cause(kind=CauseKind.TIME_LIMIT, provenance=Provenance.SCHEDULER, detail="é", exit_code=143),
]


def _random_event(rng: random.Random, n: int) -> Event:
    at = T0 + timedelta(seconds=rng.randrange(3), microseconds=rng.randrange(3))
    cause_at = rng.choice(
        [
            None,
            T0,
            at + timedelta(microseconds=rng.randrange(4)),
            at.astimezone(timezone(timedelta(hours=rng.choice([-5, 1, 9])))),
        ]
    )
    # a few causes, each at many times: the rows repeat their tails but for the times
    cause = rng.choice(_BASES).model_copy(update={"at": cause_at})
    job, seq = f"job-{rng.randrange(5)}", rng.randrange(1, 40)
    by = rng.choice([None, Identity(uid=1000, role=None)])
    return rng.choice(
        [
            lambda: RecoveryStarted(
                job_id=job,
                seq=seq,
                at=at,
                submission=rng.randrange(1, 4),
                rule=rng.randrange(2),
                action=Action.RESUBMIT,
                enforcer=Enforcer.SUPERVISOR,
                cause=cause,
            ),
            lambda: HoldPlaced(
                job_id=job, seq=seq, at=at, submission=1, rule=1, cause=cause, by=by
            ),
            lambda: SubmissionFailed(job_id=job, seq=seq, at=at, submission=2, cause=cause),
            lambda: CancelRequested(job_id=job, seq=seq, at=at, cause=cause, by=by),
            lambda: EscalationRaised(job_id=job, seq=seq, at=at, reason="look", cause=cause, by=by),
            lambda: OutcomeCommitted(
                job_id=job, seq=seq, at=at, state=State.FAILED, cause=cause, by=by
            ),
        ]
    )()


@pytest.mark.parametrize("seed", range(5))
def test_random_rows_with_causes_decode_as_the_decoder_does_S6(seed):
    rng = random.Random(seed)
    decoded = []
    for n in range(400):
        row = encode_event(_random_event(rng, n))
        decoded.append(decode_body(row))
        _same(decoded[-1], decode_event(row))
    # most came from remembered tails (their causes share the remembered fields-set)
    assert len({id(e.cause.__pydantic_fields_set__) for e in decoded}) < len(decoded) / 2
