"""The stop fence over HTTP against the emulator (S-28): a stopped submission is not shown
ended while anything carrying its labels is listed and has not ended, even once its
TrainJob is gone.

Trainer 2.2.0 re-creates the JobSet of a TrainJob deleted in Foreground mode; when the
TrainJob then goes, the re-created JobSet makes Jobs and pods until the garbage collector
removes it. The emulator's Trainer does not re-create it, so the test does what the real
one does, behind the controllers' back, and walks the cluster one controller step at a
time, discovering after each.
"""

from __future__ import annotations

import copy

from dispatch import Cause, CauseKind, JobSpec, Provenance, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.objects import JOBSET_NAME, is_true
from dispatch_kubeflow_testing.emulator.store import JOB, JOBSET, POD, TRAINJOB
from dispatch_kubeflow_testing.emulator.trainer import build_jobset

SPEC = JobSpec(
    name="train", command=("torchrun", "train.py"), resources=Resources(nodes=2, gpus_per_node=8)
)
JOB_ID = "job-fence"
STOP = Cause(kind=CauseKind.DUPLICATE, provenance=Provenance.ACTOR, actor="supervisor")


def not_ended(emulator: Emulator, name: str) -> list[str]:
    """What the cluster holds of TrainJob ``name``'s children that has not ended."""
    found = []
    with emulator.store.lock:
        for js in emulator.store.items(JOBSET, emulator.namespace):
            if js["metadata"]["name"] == name and not (
                is_true(js, "Completed") or is_true(js, "Failed")
            ):
                found.append(f"JobSet {name}")
        for job in emulator.store.items(JOB, emulator.namespace):
            if job["metadata"]["labels"].get(JOBSET_NAME) == name and not (
                is_true(job, "Complete") or is_true(job, "Failed")
            ):
                found.append(f"Job {job['metadata']['name']}")
        for pod in emulator.store.items(POD, emulator.namespace):
            phase = (pod.get("status") or {}).get("phase")
            ours = pod["metadata"]["labels"].get(JOBSET_NAME) == name
            if ours and phase not in ("Succeeded", "Failed"):
                found.append(f"Pod {pod['metadata']['name']} {phase}")
    return found


def test_children_of_a_re_created_jobset_keep_a_gone_trainjob_alive_S28(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-28: from the moment the TrainJob is gone with a re-created JobSet left, through
    the pods that JobSet makes and the collector's removal of them, discovery shows the
    submission alive whenever something of it has not ended, and not alive once nothing
    has."""
    object_id = backend.dispatch_submit(job_id=JOB_ID, submission=1, spec=SPEC, gated=False)
    name = tags.split_object_id(object_id)[1]
    emulator.settle()
    assert emulator.is_running(name)
    with emulator.store.lock:
        tj = copy.deepcopy(emulator.store.raw(TRAINJOB, emulator.namespace, name))
        runtime = copy.deepcopy(emulator.cluster.runtime_of(tj))
    assert runtime is not None

    backend.dispatch_stop(object_id, STOP)
    for _ in range(50):
        with emulator.store.lock:
            if not emulator.store.exists(JOBSET, emulator.namespace, name):
                break
        emulator.advance()
    else:
        raise AssertionError("the collector never removed the JobSet of the deleted TrainJob")
    with emulator.store.lock:
        # the Trainer re-creates the JobSet, then the TrainJob goes (its second delete)
        emulator.cluster.create(
            JOBSET, emulator.namespace, build_jobset(emulator.cluster, tj, runtime)
        )
        emulator.store.remove(TRAINJOB, emulator.namespace, name)

    seen: list[list[str]] = []
    for _ in range(50):
        left = not_ended(emulator, name)
        seen.append(left)
        objects = {o.submission: o for o in backend.dispatch_discover(job_ids=[JOB_ID]).objects}
        if not left:
            assert 1 not in objects or not objects[1].alive, objects
            break
        assert 1 in objects and objects[1].alive, (left, objects)
        emulator.advance()
    else:
        raise AssertionError(f"the re-created JobSet's children never went: {seen[-1]}")
    assert seen[0] == [f"JobSet {name}"], seen[0]
    assert any(s.startswith("Pod ") and s.endswith("Running") for left in seen for s in left), seen
