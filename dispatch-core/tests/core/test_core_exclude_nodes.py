"""S-43: a submission that follows an ending blamed on a node keeps off that node; the
exclusions are recorded with the submission request, carried to the backend in the spec,
and shown in Status. Pure, on the bench."""

from __future__ import annotations

import json
import tomllib
from datetime import timedelta

import pytest
from core_bench import World, cause, declarations, policy
from dispatch import (
    Action,
    BadInput,
    Capability,
    CauseKind,
    Phase,
    RecoveryPolicy,
    State,
    fold,
)
from dispatch.core.interventions import resubmit
from dispatch.model.events import SubmissionRequested, decode_event, encode_event
from dispatch.policy_file import parse_policy

K = CauseKind
EXCLUDING = declarations(capabilities=frozenset({Capability.GATING, Capability.EXCLUDE_NODES}))
RESUBMIT = ([K.NODE_LOST, K.PREEMPTED, K.OUT_OF_MEMORY], Action.RESUBMIT, 5)


def _requests(w: World) -> list[SubmissionRequested]:
    return [e for e in w.events if isinstance(e, SubmissionRequested)]


def _end_on(w: World, kind: CauseKind, *nodes: str) -> None:
    w.tick()
    w.run_current()
    w.end_current(cause(kind, nodes=nodes, at=w.now))
    w.tick()


def test_resubmission_after_a_lost_node_keeps_off_it_S43() -> None:
    w = World(policy(RESUBMIT), EXCLUDING)
    _end_on(w, K.NODE_LOST, "node-3")
    assert [r.exclude_nodes for r in _requests(w)] == [frozenset(), {"node-3"}]
    assert w.submitted[-1].spec.exclude_nodes == {"node-3"}
    st = w.status()
    assert st.state is State.RECOVERING
    assert st.exclude_nodes == ("node-3",)
    assert [s.exclude_nodes for s in st.submissions] == [(), ("node-3",)]


def test_exclusions_accumulate_and_only_blamed_endings_add_to_them_S43() -> None:
    w = World(policy(RESUBMIT), EXCLUDING)
    _end_on(w, K.NODE_LOST, "node-3")
    _end_on(w, K.NODE_LOST, "node-1", "node-2")
    _end_on(w, K.PREEMPTED, "node-9")  # preemption is not the node's fault
    assert [r.exclude_nodes for r in _requests(w)] == [
        frozenset(),
        {"node-3"},
        {"node-1", "node-2", "node-3"},
        {"node-1", "node-2", "node-3"},
    ]
    assert w.status().exclude_nodes == ("node-1", "node-2", "node-3")
    assert w.submitted[-1].spec.exclude_nodes == {"node-1", "node-2", "node-3"}


def test_past_the_node_loss_window_the_gated_replacement_keeps_off_the_node_S27_S43() -> None:
    w = World(policy(RESUBMIT), EXCLUDING)
    w.tick()
    old = w.run_current()
    w.set(old, Phase.RUNNING, cause(K.NODE_LOST, nodes=("node-5",), at=w.now))
    w.advance(301)
    w.tick()
    assert [s.object_id for s in w.stopped] == [old]
    replacement = w.submitted[-1]
    assert (replacement.gated, replacement.spec.exclude_nodes) == (True, {"node-5"})


def test_a_backend_that_cannot_keep_off_nodes_records_no_exclusion_S43() -> None:
    w = World(policy(RESUBMIT))  # declares gating only
    _end_on(w, K.NODE_LOST, "node-3")
    assert [r.exclude_nodes for r in _requests(w)] == [frozenset(), frozenset()]
    assert w.submitted[-1].spec.exclude_nodes == frozenset()
    assert w.status().exclude_nodes == ()


def _policy_file(text: str) -> RecoveryPolicy:
    return parse_policy(tomllib.loads(text), where="p.toml")


RULES = '[[rule]]\non = ["node-lost", "out-of-memory"]\naction = "resubmit"\nbudget = 3\n'


def test_the_policy_names_the_endings_blamed_on_nodes_S43() -> None:
    pol = _policy_file('avoid_nodes_after = ["node-lost", "out-of-memory"]\n' + RULES)
    assert pol.avoid_nodes_after == {K.NODE_LOST, K.OUT_OF_MEMORY}
    w = World(pol, EXCLUDING)
    _end_on(w, K.OUT_OF_MEMORY, "node-7")
    assert _requests(w)[-1].exclude_nodes == {"node-7"}


def test_an_empty_list_turns_exclusion_off_S43() -> None:
    pol = _policy_file("avoid_nodes_after = []\n" + RULES)
    assert pol.avoid_nodes_after == frozenset()
    w = World(pol, EXCLUDING)
    _end_on(w, K.NODE_LOST, "node-3")
    assert _requests(w)[-1].exclude_nodes == frozenset()


def test_by_default_only_a_lost_node_is_blamed_S43() -> None:
    pol = _policy_file(RULES)
    assert pol.avoid_nodes_after == {K.NODE_LOST}
    w = World(pol, EXCLUDING)
    _end_on(w, K.OUT_OF_MEMORY, "node-7")
    assert _requests(w)[-1].exclude_nodes == frozenset()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('avoid_nodes_after = ["martian"]', "p.toml: key 'avoid_nodes_after': unknown cause"),
        ("avoid_nodes_after = 3", "p.toml: key 'avoid_nodes_after' must list a list of causes"),
        ('avoid_nodes_after = ["none"]', "p.toml: avoid_nodes_after names 'none'"),
        ('avoid_nodes_after = ["requeued"]', "avoid_nodes_after names 'requeued'"),
    ],
)
def test_a_bad_avoid_list_is_refused_naming_the_file_and_key_S36_S43(
    text: str, needle: str
) -> None:
    with pytest.raises(BadInput) as err:  # PolicyError is a BadInput too
        _policy_file(text + "\n" + RULES)
    assert needle in str(err.value)


def test_after_a_hold_on_a_lost_node_the_manual_resubmission_keeps_off_it_S14_S43() -> None:
    w = World(policy(([K.NODE_LOST], Action.HOLD, None)), EXCLUDING)
    _end_on(w, K.NODE_LOST, "node-4")
    assert w.status().state is State.HELD
    w.events.extend(resubmit(w.job, actor="alice", now=w.now))
    w.tick()
    assert _requests(w)[-1].exclude_nodes == {"node-4"}
    assert w.submitted[-1].spec.exclude_nodes == {"node-4"}


def test_without_gating_the_later_request_keeps_off_the_node_too_S28_S43() -> None:
    decl = declarations(capabilities=frozenset({Capability.EXCLUDE_NODES}))
    w = World(policy(RESUBMIT), decl)
    w.tick()
    old = w.run_current()
    w.set(old, Phase.RUNNING, cause(K.NODE_LOST, nodes=("node-6",), at=w.now))
    w.advance(301)
    w.tick()  # stops it; no gate to hold a replacement behind, so none yet
    assert len(_requests(w)) == 1
    w.set(old, Phase.ENDED, cause(K.CANCELLED))
    w.tick()
    assert _requests(w)[-1].exclude_nodes == {"node-6"}
    assert w.submitted[-1].spec.exclude_nodes == {"node-6"}


def test_a_submit_lost_in_a_crash_is_sent_again_with_its_exclusions_S34_S43() -> None:
    w = World(policy(RESUBMIT), EXCLUDING)
    _end_on(w, K.NODE_LOST, "node-3")
    # the crash: the intent is recorded, the object never appeared
    w.events = [e for e in w.events if not (e.type == "submission-created" and e.submission == 2)]
    w.objects = {k: v for k, v in w.objects.items() if v.submission != 2}
    w.tick()
    again = w.submitted[-1]
    assert (again.submission, again.spec.exclude_nodes) == (2, {"node-3"})


def test_exclusions_survive_the_record_S20_S43() -> None:
    w = World(policy(RESUBMIT), EXCLUDING)
    _end_on(w, K.NODE_LOST, "node-3")
    decoded = [decode_event(encode_event(e)) for e in w.events]
    assert decoded == w.events
    assert fold(decoded).submissions[-1].exclude_nodes == {"node-3"}


def test_a_plan_recorded_before_the_knob_decodes_with_the_default_S6_S43() -> None:
    w = World(policy(RESUBMIT), EXCLUDING)
    created = w.events[0].model_dump(mode="json")
    del created["plan"]["policy"]["avoid_nodes_after"]
    assert decode_event(json.dumps(created)).plan.policy.avoid_nodes_after == {K.NODE_LOST}


def test_pending_windows_never_blame_a_node_unless_asked_S39_S43() -> None:
    decl = EXCLUDING.model_copy(update={"pending_windows": {K.NO_CAPACITY: timedelta(0)}})
    w = World(policy(([K.NO_CAPACITY], Action.RESUBMIT, 2)), decl)
    w.tick()
    oid = w.current_object()
    w.set(oid, Phase.PENDING, cause(K.NO_CAPACITY, nodes=("node-1",), at=w.now))
    w.advance(1)
    w.tick()
    assert _requests(w)[-1].submission == 2
    assert _requests(w)[-1].exclude_nodes == frozenset()
