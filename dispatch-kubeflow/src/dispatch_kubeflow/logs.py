"""What a TrainJob printed, read back through the API (S-46): the pods' logs, per node.

Kubernetes keeps one log per container run, stdout and stderr together, and only the
current run and the one before its last restart (``previous``). So:

- a submission's log is its pods' logs in execution order (JobSet restart attempt), then
  node rank; within a pod, the run before a container restart first;
- ``--node`` selects the pods that ran on that node, ``--rank R`` the pod of node rank
  ``R // tasks_per_node`` (a pod is one node: with several tasks per node its log holds
  every task of that node, interleaved, as the container printed them);
- ``stderr`` is refused: it is in the same log as stdout;
- the pods of a JobSet attempt that restarted, and of a deleted TrainJob, are gone with
  their logs: the cluster keeps no more, and neither can dispatch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from dispatch.model.errors import BadInput

from dispatch_kubeflow.errors import ApiRefused
from dispatch_kubeflow.evidence import (
    Obj,
    attempt_of,
    container_statuses,
    mapping,
    name_of,
    node_of,
    rank_of,
    small_int,
    status,
    tasks_per_node,
)

if TYPE_CHECKING:
    from dispatch_kubeflow.kube import Kube


def select(pods: Sequence[Obj], node: str | None, rank: int | None) -> list[Obj]:
    """The pods whose logs answer the request, in execution then node-rank order."""
    ordered = sorted(pods, key=lambda p: (attempt_of(p) or 0, rank_of(p) or 0, name_of(p)))
    if node is not None:
        chosen = [p for p in ordered if node_of(p) == node]
        if not chosen:
            ran = sorted({n for p in ordered if (n := node_of(p))})
            raise BadInput(
                f"--node {node}: this submission has no pod on that node"
                + (f" (its pods ran on {', '.join(ran)})" if ran else " (no pod has run yet)")
            )
        ordered = chosen
    if rank is not None:
        chosen = [p for p in ordered if rank_of(p) == rank // tasks_per_node(p)]
        if rank < 0 or not chosen:
            world = sum(tasks_per_node(p) for p in ordered if attempt_of(p) == 0) or 0
            raise BadInput(
                f"--rank {rank}: not a rank of this submission"
                + (f" (ranks 0..{world - 1})" if world else " (no pod has run yet)")
            )
        ordered = chosen
    return ordered


def restarted(pod: Obj) -> bool:
    return any(
        (small_int(cs.get("restartCount"), 0, 1 << 31) or 0) > 0 for cs in container_statuses(pod)
    )


def read(kube: Kube, pods: Iterable[Obj]) -> Iterator[bytes]:
    """Each pod's previous run (after a container restart), then its current one. A pod
    still waiting to start, or a previous run the kubelet no longer has, is skipped."""
    for pod in pods:
        namespace = mapping(pod.get("metadata")).get("namespace") or kube.namespace
        runs = (True, False) if restarted(pod) else (False,)
        for previous in runs:
            if not previous and status(pod).get("phase") == "Pending":
                continue
            try:
                yield from kube.pod_log(namespace, name_of(pod), previous=previous)
            except ApiRefused as exc:
                if exc.status not in (400, 404):
                    raise


def skip(chunks: Iterable[bytes], offset: int) -> Iterator[bytes]:
    """The chunks without their first ``offset`` bytes (``--follow`` reads on from there)."""
    for chunk in chunks:
        if offset >= len(chunk):
            offset -= len(chunk)
            continue
        yield chunk[offset:] if offset else chunk
        offset = 0
