"""Properties over random records and discoveries (hypothesis), on the pure bench."""

from __future__ import annotations

import itertools
import json

from core_bench import World, cause, declarations, policy
from dispatch import (
    Action,
    Capability,
    CauseKind,
    DecodeError,
    Execution,
    Level,
    Phase,
    State,
    fold,
    project,
)
from dispatch.core.interventions import cancel, give_up, resubmit
from dispatch.core.status import Status
from dispatch.model.enums import TERMINAL_STATES
from dispatch.model.events import (
    HoldPlaced,
    RecoveryStarted,
    SubmissionRequested,
    decode_event,
    encode_event,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ENDINGS = [
    k
    for k in CauseKind
    if k not in (CauseKind.HELD, CauseKind.RELEASED, CauseKind.REQUEUED, CauseKind.DUPLICATE)
]
ENDINGS += [CauseKind.PREEMPTED] * 6 + [CauseKind.NON_ZERO_EXIT] * 3 + [CauseKind.NODE_LOST] * 2
RULES = st.sampled_from(
    [
        [
            ([CauseKind.PREEMPTED, CauseKind.NODE_LOST], Action.RESUBMIT, 2),
            ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None),
        ],
        [
            ([CauseKind.PREEMPTED], Action.REQUEUE, 2),
            ([CauseKind.OUT_OF_MEMORY], Action.RESUBMIT, 1),
            ([CauseKind.UNKNOWN], Action.ESCALATE, None),
        ],
        [
            ([CauseKind.NODE_LOST], Action.RESTART, 1),
            ([CauseKind.TIME_LIMIT, CauseKind.NO_CAPACITY], Action.RESUBMIT, 3),
        ],
        [],
    ]
)
#: Weighted so that most runs get through several submissions before anyone cancels.
STEP = st.sampled_from(
    ["tick"] * 8
    + ["run"] * 3
    + ["end"] * 3
    + ["advance"] * 2
    + ["resubmit"] * 2
    + ["node-lost", "pending-reason", "native", "vanish", "duplicate", "give-up", "cancel"]
)


NODES = st.lists(st.sampled_from(["n1", "n2", "n3"]), max_size=2).map(tuple)


def _play(data: st.DataObject) -> tuple[World, list[Status]]:
    native = data.draw(st.booleans())
    excluding = {Capability.EXCLUDE_NODES} if data.draw(st.booleans()) else set()
    decl = declarations(
        native_actions=frozenset({Action.REQUEUE}) if native else frozenset(),
        capabilities=frozenset({Capability.GATING, *excluding}),
    )
    w = World(policy(*data.draw(RULES)), decl)
    statuses: list[Status] = []
    for _ in range(data.draw(st.integers(min_value=1, max_value=40))):
        step = data.draw(STEP)
        # an ended object never comes back to life (a requeue shows as a new execution)
        oid = w.current_object() if w.objects else None
        if (
            oid
            and not w.objects[oid].alive
            and step in ("run", "end", "node-lost", "pending-reason", "native")
        ):
            oid = None
        try:
            if step == "tick":
                w.tick()
            elif step == "advance":
                w.advance(data.draw(st.sampled_from([1, 120, 400, 4000])))
            elif oid and step == "run":
                w.set(oid, Phase.RUNNING)
            elif oid and step == "end":
                kind = data.draw(st.sampled_from(ENDINGS))
                w.set(oid, Phase.ENDED, cause(kind, at=w.now, nodes=data.draw(NODES)))
            elif oid and step == "node-lost":
                lost = cause(CauseKind.NODE_LOST, at=w.now, nodes=data.draw(NODES))
                w.set(oid, Phase.RUNNING, lost)
            elif oid and step == "pending-reason" and w.objects[oid].phase is Phase.PENDING:
                # a pending object's reason; a running object is pending again only after
                # an ended execution (the "native" step): discovery reports every execution
                w.set(oid, Phase.PENDING, cause(CauseKind.NO_CAPACITY, at=w.now))
            elif oid and step == "native":
                old = w.objects[oid].executions
                n = len(old)
                ended = Execution(
                    index=n, cause=cause(data.draw(st.sampled_from(ENDINGS)), at=w.now)
                )
                w.set(oid, Phase.PENDING, None, (*old, ended))
            elif oid and step == "vanish":
                del w.objects[oid]
            elif oid and step == "duplicate":
                o = w.objects[oid]
                w.objects[oid + "-dup"] = o.model_copy(update={"object_id": oid + "-dup"})
            elif step == "cancel":
                w.events.extend(cancel(w.job, actor="a", now=w.now))
            elif step == "resubmit":
                w.events.extend(resubmit(w.job, actor="a", now=w.now))
            elif step == "give-up":
                w.events.extend(give_up(w.job, actor="a", now=w.now))
        except ValueError:
            pass  # a request the job's state refuses (NotAllowed): nothing was appended
        statuses.append(w.status())
    return w, statuses


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data())
def test_fold_is_deterministic_and_incremental_S20_S24(data: st.DataObject) -> None:
    w, _ = _play(data)
    whole = fold(w.events)
    assert fold(w.events) == whole
    cut = data.draw(st.integers(min_value=1, max_value=len(w.events)))
    assert fold(w.events[cut:], fold(w.events[:cut])) == whole
    decoded = [decode_event(encode_event(e)) for e in w.events]
    assert project(fold(decoded), w.discovery(), w.now) == project(
        whole, w.discovery(), w.now
    )  # S-24


@SETTINGS
@given(st.data())
def test_terminal_only_when_committed_and_never_changes_S18(data: st.DataObject) -> None:
    _, statuses = _play(data)
    committed = None
    for st_ in statuses:
        if st_.state in TERMINAL_STATES and st_.settled:
            assert any(h.event == "outcome-committed" for h in st_.history)
        if committed is not None:
            assert (st_.state, st_.settled) == (committed, True)
        if st_.settled and st_.state in TERMINAL_STATES:
            committed = st_.state


@SETTINGS
@given(st.data())
def test_recovering_never_returns_to_pending_S17(data: st.DataObject) -> None:
    _, statuses = _play(data)
    seen = False
    for st_ in statuses:
        seen = seen or st_.state is State.RECOVERING
        if seen:
            assert st_.state is not State.PENDING


@SETTINGS
@given(st.data())
def test_no_budget_is_over_spent_S13_S16(data: st.DataObject) -> None:
    w, _ = _play(data)
    job = w.job
    for index, rule in enumerate(job.plan.policy.rules):
        assert job.spent.get(index, 0) <= (rule.budget or 0)
    submissions = len(job.submissions)
    resubmits = sum(1 for h in job.history if h.note.startswith("resubmit by supervisor"))
    manual = sum(1 for h in job.history if h.event == "hold-resolved" and h.note == "resubmit")
    assert submissions <= 1 + resubmits + manual  # nothing submitted that no recovery asked for


@SETTINGS
@given(st.data())
def test_object_only_is_never_terminal_S29(data: st.DataObject) -> None:
    w, _ = _play(data)
    st_ = project(None, w.discovery(), w.now, job_id=w.job_id)
    assert st_.level is Level.OBJECT_ONLY
    assert st_.state in (State.PENDING, State.RUNNING)


@SETTINGS
@given(st.data())
def test_every_model_round_trips_S6(data: st.DataObject) -> None:
    w, statuses = _play(data)
    for e in w.events:
        assert decode_event(encode_event(e)) == e
    for st_ in statuses:
        assert Status.model_validate_json(st_.model_dump_json()) == st_
    disc = w.discovery()
    assert type(disc).model_validate_json(disc.model_dump_json()) == disc


def _enum_paths(node: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    names = {"kind", "provenance", "action", "enforcer", "state", "resolution", "phase", "type"}
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in names and isinstance(v, str):
                found.append((*path, k))
            found.extend(_enum_paths(v, (*path, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found.extend(_enum_paths(v, (*path, i)))
    return found


@SETTINGS
@given(st.data())
def test_unknown_name_in_any_enum_field_is_refused_S6(data: st.DataObject) -> None:
    w, _ = _play(data)
    event = data.draw(st.sampled_from(w.events))
    doc = json.loads(encode_event(event))
    paths = _enum_paths(doc)
    path = data.draw(st.sampled_from(paths))
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = "from-a-newer-build"
    try:
        decode_event(json.dumps(doc))
    except DecodeError as err:
        assert "from-a-newer-build" in str(err)
    else:
        raise AssertionError(f"accepted an unknown name at {path}")


@SETTINGS
@given(st.data())
def test_folded_job_equals_its_validated_self_S20(data: st.DataObject) -> None:
    """fold builds its models without validating them again (they come from validated
    events); this proves nothing is lost or mistyped on that path."""
    from dispatch import Job

    w, _ = _play(data)
    job = fold(w.events)
    again = Job.model_validate_json(job.model_dump_json())
    assert again == job
    assert again.model_dump() == job.model_dump()


@SETTINGS
@given(st.data())
def test_exclusions_only_grow_only_name_lost_nodes_and_only_where_enforced_S43(
    data: st.DataObject,
) -> None:
    w, statuses = _play(data)
    requests = [e for e in w.events if isinstance(e, SubmissionRequested)]
    if not w.plan.declarations.supports(Capability.EXCLUDE_NODES):
        assert all(not r.exclude_nodes for r in requests)
    for earlier, later in itertools.pairwise(requests):
        assert earlier.exclude_nodes <= later.exclude_nodes
    blamed = {  # nodes of the node-lost endings a recovery or hold was decided on
        node
        for e in w.events
        if isinstance(e, (RecoveryStarted, HoldPlaced)) and e.cause.kind is CauseKind.NODE_LOST
        for node in e.cause.nodes
    }
    assert not requests or requests[-1].exclude_nodes <= blamed
    for submit in w.submitted:
        recorded = next(r for r in requests if r.submission == submit.submission)
        assert submit.spec.exclude_nodes == recorded.exclude_nodes
    for st_ in statuses:
        assert list(st_.exclude_nodes) == sorted(st_.exclude_nodes)


@SETTINGS
@given(st.data())
def test_a_packed_job_unpacks_to_the_job_folded_S20(data: st.DataObject) -> None:
    """A supervisor holds its jobs packed (dispatch.core.compact): every prefix of a
    random record folds to a job that packs and unpacks to itself."""
    from dispatch.core.compact import pack, unpack

    w, _ = _play(data)
    for cut in range(1, len(w.events) + 1):
        job = fold(w.events[:cut])
        back = unpack(pack(job))
        assert back == job and back.model_dump_json() == job.model_dump_json()
        assert back.model_dump(exclude_unset=True) == job.model_dump(exclude_unset=True)
