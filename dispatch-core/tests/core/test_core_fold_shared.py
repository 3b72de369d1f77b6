"""What a fold shares between jobs stays safe to share (S-20).

A fold hands every job of a sweep the same fields-set per model class, the same empty
``stopped`` and the same equal transitions, so 50,000 jobs do not hold 50,000 copies. These
tests prove that sharing is invisible: copying one job's model leaves the others alone, a
continued fold never changes the job it continued from, and a fold of rows decoded by the
store's codec equals the fold of the same rows decoded by pydantic, field for field.
"""

from __future__ import annotations

from core_bench import World, cause, policy
from dispatch import Action, CauseKind, Job, fold
from dispatch.core.folding import forget as forget_transitions
from dispatch.model.events import decode_event, encode_event
from dispatch.store.codec import decode_body, forget


def _record(job: str = "job-1") -> list[str]:
    w = World(policy(([CauseKind.PREEMPTED], Action.RESUBMIT, 5)))
    for _ in range(3):
        w.tick()
        w.run_current()
        w.end_current(cause(CauseKind.PREEMPTED))
        w.tick()
    w.tick()
    return [encode_event(e).replace("job-1", job) for e in w.events]


def test_two_jobs_share_their_fields_sets_and_copying_one_leaves_the_other_S20():
    a = fold([decode_event(r) for r in _record("job-a")])
    b = fold([decode_event(r) for r in _record("job-b")])
    assert a.submissions[0].__pydantic_fields_set__ is b.submissions[0].__pydantic_fields_set__
    moved = a.submissions[0].model_copy(update={"object_id": "elsewhere"})
    assert moved.object_id == "elsewhere"
    assert moved.model_fields_set == a.submissions[0].model_fields_set
    assert b.submissions[0].object_id != "elsewhere"
    assert b.submissions[0].model_fields_set == set(type(b.submissions[0]).model_fields)


def test_equal_transitions_are_one_object_and_equal_to_validated_ones_S20():
    """Through the store's codec, as a supervisor reads: equal causes are one object."""
    forget()
    forget_transitions()
    a = fold([decode_body(r) for r in _record("job-a")])
    b = fold([decode_body(r) for r in _record("job-b")])
    assert a.history and all(x is y for x, y in zip(a.history, b.history, strict=True))
    again = Job.model_validate_json(b.model_dump_json())
    assert again == b and again.model_dump() == b.model_dump()


def test_a_continued_fold_gives_a_new_job_and_leaves_the_old_one_as_it_was_S20():
    events = [decode_event(r) for r in _record()]
    half = len(events) // 2
    first = fold(events[:half])
    dumped = first.model_dump_json()
    whole = fold(events[half:], first)
    assert whole is not first
    assert first.model_dump_json() == dumped  # nothing of ``first`` changed in place
    assert whole == fold(events)
    assert whole.spent is not first.spent


def test_a_fold_of_codec_rows_equals_a_fold_of_decoded_rows_S6_S20():
    forget()
    rows = [_record(f"job-{n}") for n in range(4)]
    for record in rows:
        via_codec = fold([decode_body(r) for r in record])
        via_pydantic = fold([decode_event(r) for r in record])
        assert via_codec == via_pydantic
        assert via_codec.model_dump_json() == via_pydantic.model_dump_json()
