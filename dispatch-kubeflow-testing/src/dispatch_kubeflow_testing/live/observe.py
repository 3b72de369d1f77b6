"""Reading the adapter under test while the real controllers work: poll its discovery
until the view says what the test waits for, and fail with the last view (and the
objects behind it) when it never does."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from dispatch import Phase
from dispatch.model.discovery import ObjectView
from dispatch.model.spec import JobSpec
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend

from dispatch_kubeflow_testing.live.driver import LiveDriver


def submit(
    backend: KubeflowBackend,
    job_id: str,
    spec: JobSpec,
    *,
    gated: bool = False,
    submission: int = 1,
) -> str:
    """Submit through the adapter; returns the TrainJob's name."""
    object_id = backend.dispatch_submit(
        job_id=job_id, submission=submission, spec=spec, gated=gated
    )
    return tags.split_object_id(object_id)[1]


def view(backend: KubeflowBackend, job_id: str) -> ObjectView | None:
    objects = backend.dispatch_discover(job_ids=[job_id]).objects
    return objects[-1] if objects else None


def until(
    backend: KubeflowBackend,
    job_id: str,
    what: str,
    check: Callable[[ObjectView], bool],
    *,
    live: LiveDriver | None = None,
    timeout: float = 120.0,
) -> ObjectView:
    """The adapter's view once ``check`` holds; an AssertionError with the last view and
    the cluster's objects otherwise."""
    deadline = time.monotonic() + timeout
    last: ObjectView | None = None
    while True:
        last = view(backend, job_id)
        if last is not None and check(last):
            return last
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    evidence = ""
    if live is not None and last is not None:
        name = tags.split_object_id(last.object_id)[1]
        try:
            evidence = json.dumps(
                {
                    "trainjob": live.trainjob(name).get("status"),
                    "jobs": [j.get("status") for j in live.jobs(name)],
                    "pods": [
                        {"name": p["metadata"]["name"], "status": p.get("status")}
                        for p in live.pods(name)
                    ],
                },
                indent=1,
                default=str,
            )
        except Exception as exc:
            evidence = f"(could not read the objects: {exc})"
    shown = last.model_dump_json(indent=1) if last is not None else "no object discovered"
    raise AssertionError(f"not {what} after {timeout:.0f} s; last view:\n{shown}\n{evidence}")


def ended(obj: ObjectView) -> bool:
    return obj.phase is Phase.ENDED
