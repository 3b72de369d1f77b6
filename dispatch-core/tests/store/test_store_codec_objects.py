"""The row codec remembers a tail naming a scheduler object without the object's id
(ids never repeat, so a cold start decodes each once), and decodes exactly as strictly as
``decode_event`` all the same (S-6).

Each test first lets the codec see valid rows of the shape, so that a later row differing
only where the danger is would be served from the cache if the codec were too trusting.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from dispatch.core.cause import Cause
from dispatch.model.enums import CauseKind, Provenance
from dispatch.model.events import (
    GateOpened,
    ObjectFound,
    ObjectMissing,
    StopRequested,
    decode_event,
    encode_event,
)
from dispatch.store.base import UndecodableRow, decode_row
from dispatch.store.codec import decode_body, forget


@pytest.fixture(autouse=True)
def empty_caches():
    forget()
    yield
    forget()


def _seen_twice(ev, seq: int = 3) -> str:
    """A submission-created row whose shape the codec now knows (seen twice, other ids)."""
    for job, oid in (("job-a", "sim-1"), ("job-b", "sim-2")):
        decode_body(encode_event(ev.object_created(job, seq, oid)))
    return encode_event(ev.object_created("job-c", seq, "sim-3"))


def test_rows_differing_only_in_the_object_id_decode_as_the_decoder_does_S6(ev):
    rows = [encode_event(ev.object_created(f"job-{n}", 3, f"sim-{n}")) for n in range(5)]
    got = [decode_body(r) for r in rows]
    assert got == [decode_event(r) for r in rows]
    assert [e.object_id for e in got] == [f"sim-{n}" for n in range(5)]
    # served from the remembered tail (one shared fields-set), not decoded again
    assert got[2].__pydantic_fields_set__ is got[4].__pydantic_fields_set__
    for a, b in zip(got, [decode_event(r) for r in rows], strict=True):
        assert list(a.__dict__) == list(b.__dict__)  # same field order: same dump, same repr
        assert a.model_fields_set == b.model_fields_set
        assert encode_event(a) == encode_event(b)


@pytest.mark.parametrize(
    "make",
    [
        lambda j, o: GateOpened(job_id=j, seq=4, at=_AT, submission=1, object_id=o),
        lambda j, o: ObjectMissing(job_id=j, seq=4, at=_AT, submission=1, object_id=o),
        lambda j, o: ObjectFound(job_id=j, seq=4, at=_AT, submission=1, object_id=o),
        lambda j, o: StopRequested(
            job_id=j, seq=4, at=_AT, submission=1, object_id=o, cause=_CAUSE
        ),
    ],
    ids=["gate-opened", "object-missing", "object-found", "stop-requested"],
)
def test_every_event_naming_an_object_keeps_its_own_id_S6(make):
    events = [make(f"job-{n}", f"obj-{n}") for n in range(4)]
    got = [decode_body(encode_event(e)) for e in events]
    assert got == events
    assert all(type(g) is type(e) for g, e in zip(got, events, strict=True))


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('"submission":1', '"submission":0', "submission"),
        ('"adopted":false', '"adopted":"maybe"', "adopted"),
        ('"adopted":false', '"adopted":false,"priority":7', "priority"),
    ],
    ids=["submission-zero", "adopted-not-bool", "extra-field"],
)
def test_a_bad_value_beside_a_known_object_tail_is_refused_with_job_seq_and_field_S6(
    ev, old, new, field
):
    good = _seen_twice(ev)
    bad = good.replace(old, new, 1)
    assert bad != good
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-c", 3, bad)
    assert field in (err.value.field.split(".")[-1], str(err.value.value))
    assert "job 'job-c'" in str(err.value) and "seq 3" in str(err.value)


def test_an_unknown_event_type_with_the_same_object_shape_is_refused_S6(ev):
    good = _seen_twice(ev)
    bad = good.replace('"type":"submission-created"', '"type":"submission-teleported"', 1)
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-c", 3, bad)
    assert err.value.field == "type" and err.value.value == "submission-teleported"
    assert "job 'job-c'" in str(err.value) and "seq 3" in str(err.value)


def test_an_object_id_with_escapes_is_decoded_by_the_strict_decoder(ev):
    _seen_twice(ev)
    tricky = encode_event(ev.object_created("job-c", 3, 'a"b\\c\u00e9\n'))
    assert decode_body(tricky).object_id == 'a"b\\c\u00e9\n'
    assert decode_body(tricky) == decode_event(tricky)


def test_an_object_id_that_is_not_a_string_is_refused_S6(ev):
    good = _seen_twice(ev)
    bad = good.replace('"object_id":"sim-3"', '"object_id":7', 1)
    assert bad != good
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-c", 3, bad)
    assert err.value.field.split(".")[-1] == "object_id"


_AT = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)
_CAUSE = Cause(kind=CauseKind.PREEMPTED, provenance=Provenance.SCHEDULER, detail="preempted")
