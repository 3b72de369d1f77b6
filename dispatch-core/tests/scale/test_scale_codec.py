"""The store's row codec decodes exactly as strictly as ``decode_event`` (S-6).

The codec reuses a tail it validated before, so every test first lets it see a valid row
with the same tail, then hands it a row that differs only where the danger is: in the head
it does not validate again, or in a tail that must still be refused.
"""

from __future__ import annotations

import json

import pytest
from dispatch.model.events import decode_event, encode_event
from dispatch.store.base import UndecodableRow, decode_row
from dispatch.store.codec import collector_paused, decode_body, forget


@pytest.fixture(autouse=True)
def empty_caches():
    forget()
    yield
    forget()


def rows(ev):
    return [encode_event(e) for e in [*ev.record("job-a", 4), ev.hold("job-a", 5)]]


def test_codec_gives_the_decoders_events_field_for_field_S6(ev):
    first = [decode_body(r) for r in rows(ev)]
    again = [decode_body(r) for r in rows(ev)]  # the second time, every tail is known
    assert first == again == [decode_event(r) for r in rows(ev)]
    for a, b in zip(again, first, strict=True):
        assert type(a) is type(b)
        assert a.model_fields_set == b.model_fields_set
        assert encode_event(a) == encode_event(b)


def test_a_codec_event_copies_like_a_decoded_one(ev):
    decode_body(encode_event(ev.hold("job-a", 5)))
    got = decode_body(encode_event(ev.hold("job-b", 5)))
    moved = got.model_copy(update={"job_id": "job-c"})
    assert moved.job_id == "job-c" and got.job_id == "job-b"
    assert moved == ev.hold("job-c", 5)
    assert decode_body(encode_event(ev.hold("job-d", 5))).model_fields_set == got.model_fields_set


def test_a_known_tail_under_another_head_gets_that_head(ev):
    decode_body(encode_event(ev.hold("job-a", 5)))
    other = ev.hold("job-b", 9).model_copy(update={"actor": "bo"})
    got = decode_body(encode_event(other))
    assert got == other and got.job_id == "job-b" and got.seq == 9 and got.actor == "bo"


def test_jobs_of_one_sweep_share_one_spec_and_plan(ev):
    a = decode_body(encode_event(ev.created("job-a")))
    b = decode_body(encode_event(ev.created("job-b", name="train")))
    c = decode_body(encode_event(ev.created("job-c", name="other")))  # another tail
    assert a.plan is b.plan and a.spec is b.spec
    assert c.plan is a.plan  # equal plan, shared even though the tail differs
    assert c.spec == ev.created("job-c", name="other").spec


def _head_variant(body: str, old: str, new: str) -> str:
    assert old in body
    return body.replace(old, new, 1)


HEADS = {
    # a head the pattern must not read: each goes to the strict decoder and is refused
    "naive-time": ('"at":"2026-03-01T12:00:05Z"', '"at":"2026-03-01T12:00:05"', "at"),
    "seq-zero": ('"seq":5', '"seq":0', "seq"),
    "extra-head-field": ('"actor":null,', '"actor":null,"priority":7,', "priority"),
    "actor-number": ('"actor":null', '"actor":7', "actor"),
    "empty-job": ('"job_id":"job-a"', '"job_id":""', "job_id"),
}


@pytest.mark.parametrize("case", sorted(HEADS))
def test_a_bad_head_on_a_known_tail_is_refused_with_job_seq_and_field_S6(ev, case):
    good = encode_event(ev.hold("job-a", 5))
    decode_body(good)
    old, new, field = HEADS[case]
    bad = _head_variant(good, old, new)
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-a", 5, bad)
    assert err.value.field.split(".")[-1] == field
    assert "job 'job-a'" in str(err.value) and "seq 5" in str(err.value)


def test_a_head_naming_another_job_is_refused_even_with_a_known_tail_S6(ev):
    decode_body(encode_event(ev.hold("job-a", 5)))
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-a", 5, encode_event(ev.hold("job-z", 5)))
    assert err.value.field == "job_id"


TAILS = {
    "unknown-type": (lambda b: b.update(type="hold-teleported"), "type"),
    "unknown-kind": (lambda b: b["cause"].update(kind="sunspots"), "kind"),
    "extra-field": (lambda b: b.update(priority=7), "priority"),
}


@pytest.mark.parametrize("case", sorted(TAILS))
def test_an_unknown_name_in_the_tail_is_refused_after_its_neighbour_was_cached_S6(ev, case):
    good = encode_event(ev.hold("job-a", 5))
    decode_body(good)
    change, field = TAILS[case]
    body = json.loads(good)
    change(body)
    compact = json.dumps(body, separators=(",", ":"))  # as the store writes: same head
    assert compact.startswith(good[: good.index('"type"')])
    with pytest.raises(UndecodableRow) as err:
        decode_row("job-a", 5, compact)
    assert field in (err.value.field.split(".")[-1], str(err.value.value))
    assert "job 'job-a'" in str(err.value) and "seq 5" in str(err.value)


def test_collector_paused_restores_the_collector():
    import gc

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.unfreeze()
