"""Every Kubeflow parser on mutated captured answers: a value, ``unknown`` with the raw
text, or the documented error; never an undocumented exception, a hang or a memory
blow-up (S-4, S-36).

The seeds are the listings the backend read over HTTP from the emulated cluster in
several states (running, a failed rank, a lost node, a JobSet restart, a gate, a Kueue
preemption); hypothesis replaces one value anywhere in them (text, numbers, wrong types),
deletes a key, or puts a value of the wrong shape in its place. Time per input is bounded
by hypothesis's ``deadline``, memory by a tracemalloc peak.
"""

from __future__ import annotations

import copy
import json
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dispatch import BadInput, CauseKind, JobSpec, Phase, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.classify import read
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.evidence import group, parse_time, recorded_executions
from dispatch_kubeflow.kube import server_message
from dispatch_kubeflow.logs import select, skip
from dispatch_kubeflow_testing.emulator import Emulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

MAX_BYTES = 32 * 1024 * 1024
FUZZ = settings(
    max_examples=300,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
KINDS = ("trainjobs", "jobsets", "jobs", "pods", "nodes", "workloads")
JOB = "job-f"

#: values that broke parsers before, and their relatives
NASTY = st.sampled_from(
    [
        "garbage", "2026-05-01T10:00:00", "2026-13-45T99:99:99Z", "-1", "²", "１", "",
        "9" * 5000, -1, 2**31 - 1, 2**63, 1.5, True, None, [], {}, [None], {"x": None},
        "True", "\x00", "0" * 30, "1e9",
    ]
)  # fmt: skip
VALUE = st.one_of(NASTY, st.text(max_size=30), st.integers(), st.booleans())


def _capture(emulator: Emulator, backend: KubeflowBackend) -> dict[str, list[Any]]:
    kube = backend.kube
    selector = f"{tags.MANAGED}=true"
    return {
        "trainjobs": kube.list_trainjobs(selector),
        "jobsets": kube.list_jobsets(selector),
        "jobs": kube.list_jobs(selector),
        "pods": kube.list_pods(selector),
        "nodes": kube.list_nodes(),
        "workloads": kube.list_workloads(tags.KUEUE_JOB_UID),
    }


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, list[Any]]]:
    """The answers of a real client over HTTP, in five states of the cluster."""
    emu = Emulator().start()
    kubeconfig: Path = emu.write_kubeconfig(tmp_path_factory.mktemp("fuzz") / "kubeconfig")
    emu.add_runtime("restarting", failure_policy={"maxRestarts": 3, "rules": []})
    backend = KubeflowBackend(KubeflowConfig(kubeconfig=str(kubeconfig), retries=0))
    restarting = KubeflowBackend(
        KubeflowConfig(kubeconfig=str(kubeconfig), retries=0, runtime="restarting")
    )
    queued = KubeflowBackend(KubeflowConfig(kubeconfig=str(kubeconfig), retries=0, queue="q"))
    spec = JobSpec(name="fuzz", command=("torchrun", "t.py"), resources=Resources(nodes=2))
    captured = []
    try:
        name = tags.split_object_id(backend.dispatch_submit(JOB, 1, spec, False))[1]
        emu.reconcile()
        captured.append(_capture(emu, backend))
        emu.exit(name, 3, pod=1)
        captured.append(_capture(emu, backend))
        name2 = tags.split_object_id(backend.dispatch_submit(JOB, 2, spec, False))[1]
        emu.reconcile()
        emu.lose_node(name2, pod=0)
        captured.append(_capture(emu, backend))
        name3 = tags.split_object_id(restarting.dispatch_submit(JOB, 3, spec, False))[1]
        emu.reconcile()
        emu.preempt(name3, pod=1)
        restarting.dispatch_discover([JOB])
        emu.reconcile()
        captured.append(_capture(emu, backend))
        backend.dispatch_submit(JOB, 4, spec, True)
        captured.append(_capture(emu, backend))
        name5 = tags.split_object_id(queued.dispatch_submit(JOB, 5, spec, False))[1]
        emu.reconcile()
        emu.kueue_preempt(name5)
        emu.settle()
        captured.append(_capture(emu, backend))
    finally:
        emu.stop()
    return captured


def _paths(obj: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield here
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, (*here, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _paths(value, (*here, i))


def _mutate(answer: dict[str, list[Any]], data: st.DataObject) -> dict[str, list[Any]]:
    answer = copy.deepcopy(answer)
    paths = [p for p in _paths(answer) if len(p) >= 2]
    path = data.draw(st.sampled_from(paths))
    parent: Any = answer
    for step in path[:-1]:
        parent = parent[step]
    how = data.draw(st.sampled_from(["value", "delete", "shape"]))
    if how == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif how == "shape":
        parent[path[-1]] = data.draw(st.sampled_from([None, [], {}, "", 0, [{}], {"a": []}]))
    else:
        parent[path[-1]] = data.draw(VALUE)
    return answer


def _bounded(call: Callable[[], object]) -> object:
    """One parse: only the documented error may escape; memory stays bounded."""
    tracemalloc.start()
    try:
        return call()
    except BadInput:
        return None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < MAX_BYTES, f"{peak} bytes for one input"


def _classify_all(answer: dict[str, list[Any]]) -> list[Any]:
    lists = [answer[k] if isinstance(answer[k], list) else [] for k in KINDS]
    out = []
    for ev in group(*lists, {JOB}):
        view, keep = read(ev)
        assert view.job_id == JOB and view.submission >= 1
        assert all(isinstance(v, str) for v in keep.values())
        out.append(view)
    return out


@FUZZ
@given(data=st.data())
def test_discovery_of_mutated_answers_never_raises_S4(
    seeds: list[dict[str, list[Any]]], data: st.DataObject
) -> None:
    """S-4, S-36: whatever a listing holds, classification gives an ObjectView (unknown
    with the raw words where it cannot read them), within bounded time and memory."""
    answer = _mutate(data.draw(st.sampled_from(seeds)), data)
    _bounded(lambda: _classify_all(answer))


#: a JSON value of each type; a wrongly typed field gets one of another type
WRONG: dict[str, list[Any]] = {
    "text": ["", "garbage", "9" * 300],
    "integer": [-1, 7, 2**63],
    "number": [1.5],
    "boolean": [True, False],
    "list": [[], ["ErrImagePull"], [{}], ["x" * 100_000]],
    "object": [{}, {"reason": "ErrImagePull"}],
}


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "text", list: "list", dict: "object"}[type(value)]


class _Served:
    """What an API server answered to one discovery's listings (and a write it ignores)."""

    def __init__(self, answer: dict[str, list[Any]]) -> None:
        self.answer = answer
        self.kept: list[str] = []

    def list_trainjobs(self, selector: str) -> list[Any]:
        return self.answer["trainjobs"]

    def list_jobsets(self, selector: str) -> list[Any]:
        return self.answer["jobsets"]

    def list_jobs(self, selector: str) -> list[Any]:
        return self.answer["jobs"]

    def list_pods(self, selector: str) -> list[Any]:
        return self.answer["pods"]

    def list_nodes(self) -> list[Any]:
        return self.answer["nodes"]

    def list_workloads(self, selector: str) -> list[Any]:
        return self.answer["workloads"]

    def patch_trainjob(self, namespace: str, name: str, body: object) -> None:
        self.kept.append(tags.object_id(namespace, name))


class _ServedBackend(KubeflowBackend):
    """The adapter's own discovery, reading what ``_Served`` holds instead of HTTP."""

    def __init__(self, answer: dict[str, list[Any]], trainer: tuple[int, int]) -> None:
        super().__init__(KubeflowConfig(kubeconfig="unused", retries=0, trainer_version=trainer))
        self.served = _Served(answer)

    @property
    def kube(self) -> Any:
        return self.served


def _discover(answer: dict[str, list[Any]], trainer: tuple[int, int]) -> dict[tuple[str, int], Any]:
    """Trainer 2.0 lists Jobs and pods by their JobSets' names (the TrainJobs'). Nothing
    is written on a TrainJob dispatch cannot read."""
    backend = _ServedBackend(answer, trainer)
    views = backend.dispatch_discover([JOB]).objects
    for view in views:
        if view.cause is not None and view.cause.detail.startswith("cannot read"):
            assert view.object_id not in backend.served.kept, view.cause.detail[:300]
    return {(v.job_id, v.submission): v for v in views}


@settings(FUZZ, deadline=None)  # what it proves is the answer, not its time
@given(data=st.data())
def test_wrongly_typed_answers_give_unknown_never_an_exception_S4(
    seeds: list[dict[str, list[Any]]], data: st.DataObject
) -> None:
    """S-4, S-36: one value anywhere in a TrainJob, JobSet, Job, Pod, Node or Workload (the
    object itself included) replaced by a value of another JSON type, through the
    adapter's discovery: no exception, and every object reported either exactly as before
    (the field is not one dispatch reads) or ``unknown`` with the raw value cut short; an
    object may drop out only when every object left says ``unknown`` (its owner is what
    could not be read)."""
    seed = data.draw(st.sampled_from(seeds))
    paths = [p for p in _paths(seed) if len(p) >= 2 and _at(seed, p) is not None]
    path = data.draw(st.sampled_from(paths))
    was = _json_type(_at(seed, path))
    wrong = data.draw(st.sampled_from([v for t, vs in WRONG.items() if t != was for v in vs]))
    answer = copy.deepcopy(seed)
    _at(answer, path[:-1])[path[-1]] = wrong
    trainer = data.draw(st.sampled_from([(2, 0), (2, 2)]))
    before = _discover(seed, trainer)
    after = _bounded(lambda: _discover(answer, trainer))
    assert isinstance(after, dict)
    unknown = {k for k, v in after.items() if v.cause and v.cause.kind is CauseKind.UNKNOWN}
    for key, view in after.items():
        if key in unknown:
            assert len(view.cause.detail) <= 2000, view.cause.detail[:300]
        else:
            same = view == before.get(key)
            assert same, f"{path} = {wrong!r} changed {key} unnoticed"
    if before.keys() - after.keys():
        assert unknown == after.keys(), f"{path} = {wrong!r} dropped an object unnoticed"


def _at(answer: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        answer = answer[step]
    return answer


@FUZZ
@given(data=st.data())
def test_log_selection_of_mutated_pods_is_a_list_or_bad_input_S36(
    seeds: list[dict[str, list[Any]]], data: st.DataObject
) -> None:
    answer = _mutate(data.draw(st.sampled_from(seeds)), data)
    pods = (
        [p for p in answer["pods"] if isinstance(p, dict)]
        if isinstance(answer["pods"], list)
        else []
    )
    node = data.draw(st.one_of(st.none(), st.text(max_size=10)))
    rank = data.draw(st.one_of(st.none(), st.integers(-5, 2**40)))
    _bounded(lambda: select(pods, node, rank))


@FUZZ
@given(key=st.one_of(st.integers(-5, 2**40).map(str), st.text(max_size=12)), raw=VALUE)
def test_recorded_attempt_annotations_are_read_or_skipped_S40(key: str, raw: object) -> None:
    tj = {"metadata": {"annotations": {f"{tags.ATTEMPT_PREFIX}{key}": raw}}}
    found = _bounded(lambda: recorded_executions(tj))
    assert found == {}


@FUZZ
@given(value=VALUE)
def test_times_are_a_zoned_time_or_none_S36(value: object) -> None:
    parsed = _bounded(lambda: parse_time(value))
    assert parsed is None or parsed.tzinfo is not None  # type: ignore[attr-defined]


@FUZZ
@given(body=st.one_of(st.text(max_size=50), VALUE.map(json.dumps)), status=st.integers(0, 999))
def test_api_error_bodies_give_words_S36(body: str, status: int) -> None:
    exc = ApiException(status=status, reason="Reason")
    exc.body = body
    assert isinstance(_bounded(lambda: server_message(exc)), str)


# -- the inputs that broke parsers before, pinned ---------------------------------------


@pytest.mark.parametrize("value", ["garbage", "2026-05-01T10:00:00", "2026-05-01 10:00"])
def test_a_time_that_is_garbage_or_has_no_zone_is_no_time_S36(value: str) -> None:
    assert parse_time(value) is None


def test_a_submission_label_of_minus_one_is_not_dispatchs_object_S36(
    seeds: list[dict[str, list[Any]]],
) -> None:
    answer = copy.deepcopy(seeds[0])
    for kind in ("trainjobs", "jobsets", "jobs", "pods"):
        for obj in answer[kind]:
            obj["metadata"]["labels"][tags.SUBMISSION] = "-1"
    assert _classify_all(answer) == []


@pytest.mark.parametrize("restarts", [-1, 2**31 - 1])
def test_a_restart_count_of_minus_one_or_int32_max_is_unknown_at_once_S4(
    seeds: list[dict[str, list[Any]]], restarts: int
) -> None:
    answer = copy.deepcopy(seeds[0])
    answer["jobsets"][0]["status"]["restarts"] = restarts
    (view,) = _bounded(lambda: _classify_all(answer))  # type: ignore[misc]
    assert view.phase is Phase.RUNNING and view.cause.kind is CauseKind.UNKNOWN
    assert str(restarts) in view.cause.detail and len(view.executions) == 1


def test_a_node_without_a_name_is_ignored_S36(seeds: list[dict[str, list[Any]]]) -> None:
    answer = copy.deepcopy(seeds[2])
    for node in answer["nodes"]:
        del node["metadata"]["name"]
    views = _classify_all(answer)
    assert {v.submission for v in views} == {1, 2}


@FUZZ
@given(chunks=st.lists(st.binary(max_size=20), max_size=8), offset=st.integers(0, 200))
def test_reading_on_from_an_offset_is_the_rest_of_the_log_S46(
    chunks: list[bytes], offset: int
) -> None:
    """S-46: ``--follow`` asks again from where it stopped: the bytes after ``offset``."""
    assert b"".join(skip(iter(chunks), offset)) == b"".join(chunks)[offset:]
