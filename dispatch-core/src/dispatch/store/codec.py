"""Decoding stored rows fast without decoding them less strictly (S-6).

A record is mostly repetition: every job of a sweep carries the same spec and plan, every
recovery the same cause, and one tick's events share one time. Each row the store writes
is ``encode_event``'s compact JSON, whose fields come in the model's order: the four every
event has (``job_id``, ``seq``, ``at``, ``actor``) and then the rest, from ``"type"`` on.
So a row splits into a small *head* and a *tail* that many rows share verbatim.

``decode_body`` validates a tail once, with the strict decoder, and remembers the decoded
values under the tail's exact text. A later row with the same text gets those values
(shared, not copied: every model is frozen) plus its own head, which must match a pattern
admitting only what the strict decoder would accept (a JSON string without escapes or
control characters, a positive integer, a time the strict decoder already parsed, ``null``
or a plain string). Anything else (an unseen tail, a head written another way, spaces,
escapes, bytes) goes to the strict decoder unchanged, so an unknown type, enum name or field
is still refused with the same error, naming the job, the seq and the field.

Scheduler object ids never repeat, so a row naming one (submission-created, gate-opened,
stop-requested, object-missing, object-found) is remembered without its id: the id must
be a JSON string without escapes or control characters, and goes into the event as read.
Without this, a third of a cold start's rows (every submission-created) went to pydantic.

Soundness: an event is valid exactly when its head fields and its tail fields are, the two
sets of names being disjoint; the tail's text was accepted once as part of a whole event,
and validation is a function of the text alone (no model validators). ``object_id`` is a
plain ``str`` in every event that names one, so any such string is as valid as the first.

Likewise a cause's time: the events that carry one cause at the top (recovery-started,
hold-placed, submission-failed, cancel-requested, escalation-raised, outcome-committed)
differ from job to job in little but the times, the event's and its cause's. Their tail is
remembered without the cause's ``at`` (``_CAUSE_AT`` finds it: a JSON string never holds
an unescaped quote, so the text it matches is structure, and a remembered tail's match
was checked against the decoded event's ``cause.at``); a later row's cause time must be
one the strict decoder accepts (``_time``), and its cause is the remembered one with that
time. ``Cause`` has no validators either, and its ``at`` is validated as the event's is.

A job-created row whose tail is new (another name, say) still shares its spec and plan
with an equal one decoded before (``_intern``), so 50,000 jobs of one sweep hold one plan.

Also here: ``collector_paused``, which keeps Python's cyclic garbage collector out of bulk
decoding and folding. Those allocate millions of objects that all stay alive, so every
collection the allocations trigger is wasted work (65% of a cold start).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, TypeAdapter, ValidationError

from dispatch.core.cause import Cause
from dispatch.model.events import (
    CancelRequested,
    EscalationRaised,
    Event,
    GateOpened,
    HoldPlaced,
    JobCreated,
    ObjectFound,
    ObjectMissing,
    OutcomeCommitted,
    RecoveryStarted,
    StopRequested,
    SubmissionCreated,
    SubmissionFailed,
    decode_event,
)

#: The head of a row as ``encode_event`` writes it; groups: job_id, seq, at, actor. Then,
#: for the events naming one scheduler object, the start of the tail up to that object's id
#: (group 5) and the id (group 6): ids never repeat, so the tail is remembered without it.
_ROW = re.compile(
    r'\{"job_id":"([^"\\\x00-\x1f]+)","seq":([1-9][0-9]{0,17}),'
    r'"at":"([0-9T:.+\-Z]{20,35})","actor":(null|"[^"\\\x00-\x1f]*"),(?="type":")'
    r'(?:("type":"(?:submission-created|gate-opened|stop-requested|object-missing|object-found)"'
    r',"submission":[1-9][0-9]{0,17},"object_id":")([^"\\\x00-\x1f]*)(?="))?'
)
#: In a tail without an object id, the top-level cause up to its time (group 1): every
#: field before ``at`` in the order ``encode_event`` writes them, each as JSON writes it.
_CAUSE_AT = re.compile(
    r'"cause":\{"kind":"[a-z-]+","provenance":"[a-z-]+","actor":(?:null|"[^"\\\x00-\x1f]*"),'
    r'"detail":"(?:[^"\\\x00-\x1f]|\\.)*","exit_code":(?:null|-?[0-9]{1,18}),'
    r'"at":"([0-9T:.+\-Z]{20,35})"'
)
_HEAD_FIELDS = frozenset(("job_id", "seq", "at", "actor"))
#: The event classes ``_CAUSE_AT`` may find the cause of: a ``cause: Cause`` field at the
#: top, no object id, and no other field that could hold an object with a cause.
_TIMED_CAUSE = frozenset(
    (
        RecoveryStarted,
        HoldPlaced,
        SubmissionFailed,
        CancelRequested,
        EscalationRaised,
        OutcomeCommitted,
    )
)
#: The event classes group 6 may name the object of: in each, ``object_id`` is a plain
#: ``str`` (any string is valid), right after ``submission``.
_NAMED_OBJECT = frozenset(
    (SubmissionCreated, GateOpened, StopRequested, ObjectMissing, ObjectFound)
)

#: Caches are bounded: when one is full it starts again empty. A tail goes to ``_fresh``
#: first and moves to ``_tails`` when seen again, so tails that never repeat churn
#: ``_fresh`` and do not push a sweep's spec, plan and causes out of ``_tails``.
LIMIT = 50_000

#: A known tail: the class, the values of an event with it (in field order: its head and
#: object id are replaced in every copy), the fields-set.
_Known = tuple[type[Any], dict[str, Any], set[str]]
#: Keyed by the tail's text, or for a tail naming an object by that text without the id
#: (group 5 + what follows the id). The two never collide: a tail of the second form
#: always matches group 5, so it is only ever looked up without its id.
_tails: dict[str, _Known] = {}
_fresh: dict[str, Event] = {}
#: The same, for tails remembered without their cause's time (keyed by the tail with the
#: time replaced by NUL, which valid JSON text never holds raw, so the cut is where it
#: was: one NUL in both keys); the cause's fields-set and time text go with them.
_timed: dict[str, tuple[type[Any], dict[str, Any], set[str], set[str], str]] = {}
_timed_fresh: dict[str, tuple[Event, str]] = {}
_times: dict[str, datetime] = {}
_created: dict[str, Any] = {}
_TIME: list[TypeAdapter[datetime]] = []


def _time(text: str) -> datetime | None:
    """The strict decoder's reading of an event time, or None if it refuses it."""
    known = _times.get(text)
    if known is not None:
        return known
    if not _TIME:
        _TIME.append(TypeAdapter(AwareDatetime))
    try:
        value = _TIME[0].validate_python(text)
    except ValidationError:
        return None
    if len(_times) >= LIMIT:
        _times.clear()
    _times[text] = value
    return value


_set = object.__setattr__
_new = object.__new__
_match = _ROW.match
_tails_get = _tails.get
_times_get = _times.get


def decode_body(body: str | bytes) -> Event:
    """One stored event, as ``decode_event`` decodes it (same value, same errors)."""
    if type(body) is not str:
        return decode_event(body)
    row = _match(body)
    if row is None:
        return decode_event(body)
    job_id, seq, when, actor, _, object_id = row.groups()
    if object_id is None:
        tail = body[row.end() :]
    else:
        tail = body[row.start(5) : row.start(6)] + body[row.end() :]
    known = _tails_get(tail) or _promote(tail)
    cause_at = None
    if known is None and object_id is None:
        cause_at = _CAUSE_AT.search(tail)
        if cause_at is not None:
            event = _timed_event(tail, cause_at, job_id, seq, when, actor)
            if event is not None:
                return event
    if known is not None:
        at = _times_get(when) or _time(when)
        if at is not None:
            cls, template, fields_set = known
            # a copy of a dict in field order, its head (and object id) then replaced: a
            # third of the cost of building the same dict afresh
            values = template.copy()
            values["job_id"] = job_id
            values["seq"] = int(seq)
            values["at"] = at
            values["actor"] = None if actor == "null" else actor[1:-1]
            if object_id is not None:
                values["object_id"] = object_id
            model = _new(cls)
            _set(model, "__dict__", values)
            _set(model, "__pydantic_fields_set__", fields_set)
            _set(model, "__pydantic_extra__", None)
            _set(model, "__pydantic_private__", None)
            return model  # type: ignore[no-any-return]
    event = decode_event(body)
    _remember(event, row, tail, cause_at)
    return event


def _timed_event(
    tail: str, cause_at: re.Match[str], job_id: str, seq: str, when: str, actor: str
) -> Event | None:
    """The event of a tail remembered without its cause's time, or None (not known, or a
    time the strict decoder would refuse: the caller decodes the row strictly)."""
    start, end = cause_at.span(1)
    key = tail[:start] + "\x00" + tail[end:]
    text = tail[start:end]
    known = _timed.get(key)
    if known is None:
        seen = _timed_fresh.pop(key, None)
        if seen is None:
            return None
        first, first_text = seen
        values = dict(first.__dict__)
        known = (
            type(first),
            values,
            set(first.__pydantic_fields_set__) | _HEAD_FIELDS,
            values["cause"].__pydantic_fields_set__,
            first_text,
        )
        if len(_timed) >= LIMIT:
            _timed.clear()
        _timed[key] = known
    at = _times_get(when) or _time(when)
    if at is None:
        return None
    cls, template, fields_set, cause_fields, first_text = known
    cause = template["cause"]
    if text != first_text:  # the same text is the same cause: shared, as equal tails are
        cause_time = _times_get(text) or _time(text)
        if cause_time is None:
            return None
        cause_values = cause.__dict__.copy()
        cause_values["at"] = cause_time
        cause = _new(Cause)
        _set(cause, "__dict__", cause_values)
        _set(cause, "__pydantic_fields_set__", cause_fields)
        _set(cause, "__pydantic_extra__", None)
        _set(cause, "__pydantic_private__", None)
    values = template.copy()
    values["job_id"] = job_id
    values["seq"] = int(seq)
    values["at"] = at
    values["actor"] = None if actor == "null" else actor[1:-1]
    values["cause"] = cause
    model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    event: Event = model
    return event


def _promote(tail: str) -> _Known | None:
    """A tail seen once before, now seen again: worth keeping (its values made once)."""
    event = _fresh.pop(tail, None)
    if event is None:
        return None
    # One set for every event of this tail: pydantic never changes a frozen model's set in
    # place (``model_copy`` copies it first), and a set each would cost 728 bytes an event.
    known = (type(event), dict(event.__dict__), set(event.__pydantic_fields_set__) | _HEAD_FIELDS)
    if len(_tails) >= LIMIT:
        _tails.clear()
    _tails[tail] = known
    return known


def _remember(
    event: Event, row: re.Match[str], tail: str, cause_at: re.Match[str] | None = None
) -> None:
    job_id, seq, when, actor, _, object_id = row.groups()
    if (
        event.job_id != job_id
        or event.seq != int(seq)
        or event.actor != (None if actor == "null" else actor[1:-1])
    ):
        return  # the pattern read the head otherwise than the decoder: never trust it
    if object_id is not None and (
        type(event) not in _NAMED_OBJECT or getattr(event, "object_id", None) != object_id
    ):
        return  # likewise for the object id
    if isinstance(event, JobCreated):
        _intern(event, tail)
    if cause_at is not None and type(event) in _TIMED_CAUSE:
        cause = getattr(event, "cause", None)
        start, end = cause_at.span(1)
        if (
            type(cause) is Cause
            and cause.at is not None
            and cause.at == _time(tail[start:end])
            and "at" in cause.__pydantic_fields_set__
        ):
            # remembered without the cause's time only: a tail with a time of its own
            # would churn the plain caches (and hold every event of a cold start)
            if len(_timed_fresh) >= LIMIT:
                _timed_fresh.clear()
            _timed_fresh[tail[:start] + "\x00" + tail[end:]] = (event, tail[start:end])
            if len(_times) < LIMIT:
                _times.setdefault(when, event.at)
            return
    if len(_fresh) >= LIMIT:
        _fresh.clear()
    _fresh[tail] = event
    if len(_times) < LIMIT:
        _times.setdefault(when, event.at)


def _intern(event: JobCreated, tail: str) -> None:
    """Share an equal spec and an equal plan decoded before: the text finds the candidate,
    and only an equal value replaces the event's own."""
    spec_at, plan_at = tail.find(',"spec":'), tail.rfind(',"plan":')
    if not 0 <= spec_at < plan_at:
        return
    fields = event.__dict__
    for name, key in (("spec", tail[spec_at:plan_at]), ("plan", tail[plan_at:])):
        seen = _created.get(key)
        if seen is not None and seen == fields[name]:
            fields[name] = seen
            continue
        if len(_created) >= LIMIT:
            _created.clear()
        _created[key] = fields[name]


def forget() -> None:
    """Empty the caches (tests; a long-lived process never needs to)."""
    _tails.clear()
    _fresh.clear()
    _timed.clear()
    _timed_fresh.clear()
    _times.clear()
    _created.clear()


@contextmanager
def collector_paused(freeze_over: int | None = 100_000) -> Iterator[None]:
    """Keep the cyclic collector out of a bulk decode and fold: its garbage is refcounted
    away, and what survives is long-lived. When the block left at least ``freeze_over`` new
    objects (a cold start, not a quiet tick), they are moved out of the collector's sight
    with ``gc.freeze`` so later full collections do not walk every folded job again; a
    small block's objects stay in sight, so any cycle it made is still collected.
    ``freeze_over=None`` never freezes (a tick: its many objects are short-lived)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze_over is not None and gc.get_count()[0] >= freeze_over:
            gc.freeze()
        if was:
            gc.enable()
