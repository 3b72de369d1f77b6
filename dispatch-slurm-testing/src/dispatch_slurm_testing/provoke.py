"""The scenario driver: provoke each ending for real on the Slurm that ``sinfo`` reaches.

Used by the live tests and by the conformance kit's harness. Every scenario submits
through the backend (so the object is tagged like any dispatch submission) and then, when
the ending needs someone else's hand, acts out-of-band with Slurm's own commands, run by
a separate :class:`Runner` so the backend's call count stays the adapter's own (S-32).

Assumes the cluster the project's ``scripts/start-slurm.sh`` builds: partitions ``low``
(PreemptMode=REQUEUE), ``lowcancel`` (CANCEL) and ``high`` (PriorityTier 10, OFF), one
node, ``SlurmdTimeout`` short. Node failure kills that node's slurmd and restarts it
through the start script.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from dispatch import CauseKind, Discovery, JobSpec, ObjectView, Resources, SubmitRefused
from dispatch_slurm.runner import Runner

from dispatch_slurm_testing.cluster import lose_node, memory_enforcement, restore_node

Submit = Callable[[str, int, JobSpec, bool], str]


class CannotProvoke(Exception):
    """This cluster cannot produce the scenario; the message says why."""


@dataclass
class Provocation:
    job_id: str
    object_id: str | None
    expect: CauseKind | None
    exit_code: int | None = None
    refused: SubmitRefused | None = None
    raw: str | None = None
    helpers: list[str] = field(default_factory=list)


def node_names() -> list[str]:
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.split()
    if not out:
        raise CannotProvoke("sinfo lists no node")
    return list(dict.fromkeys(out))


def node_cpus() -> int:
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%c"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.split()
    return int(out[0]) if out else 1


class Provoker:
    """Provokes endings through ``submit``; out-of-band commands run on their own runner.

    ``partition``, when set, replaces every partition a scenario would pick (a platform
    team's own cluster has none of the test cluster's partitions); ``helpers`` collects
    the untagged jobs it submitted, so a cleanup cancels exactly those.
    """

    def __init__(self, submit: Submit, workdir: str, partition: str | None = None) -> None:
        self.submit = submit
        self.workdir = workdir
        self.partition = partition
        self.helpers: list[str] = []
        self.lost: list[str] = []
        self.oob = Runner()  # out-of-band: never counted as the adapter's calls

    # -- building blocks ----------------------------------------------------------------

    def spec(
        self,
        command: tuple[str, ...] = (),
        script: str | None = None,
        resources: Resources | None = None,
        **options: str,
    ) -> JobSpec:
        chosen = {"output": f"{self.workdir}/%j.out", **options}
        if self.partition:
            chosen["partition"] = self.partition
        return JobSpec(
            name="live",
            command=command,
            script=script,
            workdir=self.workdir,
            resources=resources or Resources(),
            options=chosen,
        )

    def state(self, object_id: str) -> str:
        out = self.oob.run(["squeue", "-h", "--states=all", "-j", object_id, "-o", "%T"])
        return out.stdout.strip()

    def wait_state(self, object_id: str, states: set[str], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            now = self.state(object_id)
            if now in states:
                return now
            if time.monotonic() > deadline:
                raise CannotProvoke(f"job {object_id} stayed {now!r}, never {sorted(states)}")
            time.sleep(0.5)

    def sbatch_helper(self, *args: str) -> str:
        """An untagged job dispatch does not own (a preemptor, a failing parent)."""
        chosen = [f"--partition={self.partition}"] if self.partition else []
        out = self.oob.run(
            [
                "sbatch",
                "--parsable",
                "--job-name=dispatch-slurm-helper",
                f"--chdir={self.workdir}",
                f"--output={self.workdir}/%j.out",
                *chosen,
                *args,
            ]
        )
        if not out.ok:
            raise CannotProvoke(f"helper sbatch {' '.join(args)}: {out.words()}")
        helper = out.stdout.strip().split(";")[0]
        self.helpers.append(helper)
        return helper

    # -- scenarios ----------------------------------------------------------------------

    def success(self, job_id: str) -> Provocation:
        oid = self.submit(job_id, 1, self.spec(("true",)), False)
        return Provocation(job_id, oid, CauseKind.NONE)

    def exit_nonzero(self, job_id: str, code: int = 3) -> Provocation:
        oid = self.submit(job_id, 1, self.spec(("sh", "-c", f"exit {code}")), False)
        return Provocation(job_id, oid, CauseKind.NON_ZERO_EXIT, exit_code=code)

    def exit_137(self, job_id: str) -> Provocation:
        oid = self.submit(job_id, 1, self.spec(("sh", "-c", "exit 137")), False)
        return Provocation(job_id, oid, CauseKind.NON_ZERO_EXIT, exit_code=137)

    def signal(self, job_id: str) -> Provocation:
        """The batch script SIGKILLs itself: Slurm says FAILED/JobLaunchFailure 0:9."""
        oid = self.submit(job_id, 1, self.spec(script="#!/bin/sh\nkill -9 $$\n"), False)
        return Provocation(job_id, oid, CauseKind.NON_ZERO_EXIT, exit_code=137)

    def time_limit(self, job_id: str) -> Provocation:
        """One minute is Slurm's smallest time limit: this ending takes 60-75 s."""
        spec = self.spec(
            ("sleep", "600"), resources=Resources(time_limit=timedelta(minutes=1)), partition="high"
        )
        return Provocation(job_id, self.submit(job_id, 1, spec, False), CauseKind.TIME_LIMIT)

    def out_of_memory(self, job_id: str, in_step: bool = False) -> Provocation:
        usable, why = memory_enforcement()
        if not usable:
            raise CannotProvoke(f"no cgroup memory enforcement here: {why}")
        hog = "python3 -c 'b = bytearray(600 * 1024 * 1024); import time; time.sleep(5)'"
        if in_step:
            spec = self.spec(
                ("python3", "-c", "b = bytearray(600 * 1024 * 1024)"),
                resources=Resources(memory_mb=100),
            )
        else:
            spec = self.spec(script=f"#!/bin/sh\n{hog}\n", resources=Resources(memory_mb=100))
        return Provocation(job_id, self.submit(job_id, 1, spec, False), CauseKind.OUT_OF_MEMORY)

    def launch_failed(self, job_id: str) -> Provocation:
        """Accepted, then unable to open its output file: FAILED/JobLaunchFailure 0:53.

        The output's directory is under a file (/dev/null), so no Slurm can create it:
        26.05's slurmstepd creates a missing output directory (the jobs run as root
        here), and a /nonexistent/... it made would be there for every later test."""
        spec = self.spec(("true",))
        spec = spec.model_copy(update={"options": {"output": "/dev/null/dispatch/%j.out"}})
        return Provocation(job_id, self.submit(job_id, 1, spec, False), CauseKind.LAUNCH_FAILED)

    def refused(self, job_id: str) -> Provocation:
        """Refused by sbatch (rc 1), which still leaves a FAILED/BadConstraints record."""
        spec = self.spec(("true",), resources=Resources(memory_mb=1000 * 1024))
        try:
            oid = self.submit(job_id, 1, spec, False)
        except SubmitRefused as exc:
            return Provocation(job_id, None, CauseKind.LAUNCH_FAILED, refused=exc)
        raise CannotProvoke(f"sbatch accepted --mem=1000G as job {oid}")

    def no_capacity(self, job_id: str) -> Provocation:
        spec = self.spec(("true",), resources=Resources(cpus_per_task=4096))
        return Provocation(job_id, self.submit(job_id, 1, spec, False), CauseKind.NO_CAPACITY)

    def unmappable(self, job_id: str) -> Provocation:
        """Depends on a job that fails: pending for ever on DependencyNeverSatisfied, which
        no cause kind describes (unknown, verbatim)."""
        parent = self.sbatch_helper("--wrap=exit 1")
        self.wait_state(parent, {"FAILED"})
        spec = self.spec(("true",), sbatch_args=f"--dependency=afterok:{parent}")
        oid = self.submit(job_id, 1, spec, False)
        self.wait_state(oid, {"PENDING"})
        return Provocation(
            job_id, oid, CauseKind.UNKNOWN, raw="DependencyNeverSatisfied", helpers=[parent]
        )

    def held_by_scheduler(self, job_id: str) -> Provocation:
        spec = self.spec(("true",), sbatch_args="--begin=now+3600")
        oid = self.submit(job_id, 1, spec, False)
        out = self.oob.run(["scontrol", "hold", oid])
        if not out.ok:
            raise CannotProvoke(f"scontrol hold {oid}: {out.words()}")
        return Provocation(job_id, oid, CauseKind.HELD)

    def cancelled(self, job_id: str) -> Provocation:
        oid = self.submit(job_id, 1, self.spec(("sleep", "600")), False)
        self.wait_state(oid, {"RUNNING"})
        out = self.oob.run(["scancel", oid])
        if not out.ok:
            raise CannotProvoke(f"scancel {oid}: {out.words()}")
        return Provocation(job_id, oid, CauseKind.CANCELLED)

    def long(
        self,
        job_id: str,
        partition: str = "low",
        requeue: str = "no",
        gated: bool = False,
        **options: str,
    ) -> str:
        spec = self.spec(("sleep", "600"))
        chosen = {"partition": partition, "requeue": requeue, **options}
        spec = spec.model_copy(update={"options": {**chosen, **spec.options}})
        return self.submit(job_id, 1, spec, gated)

    def preempt(self, victims: dict[str, str], rerun_seconds: int = 5) -> str:
        """Wait until every victim runs, then start a job on ``high`` that needs all of the
        node's CPUs: Slurm preempts every low/lowcancel job to make room."""
        for oid in victims.values():
            self.wait_state(oid, {"RUNNING"})
        cpus = node_cpus()
        return self.sbatch_helper(
            "--partition=high",
            f"--nodes={len(node_names())}",
            f"--cpus-per-task={cpus}",
            f"--wrap=sleep {rerun_seconds}",
        )

    def requeue(self, object_id: str) -> None:
        self.wait_state(object_id, {"RUNNING"})
        out = self.oob.run(["scontrol", "requeue", object_id])
        if not out.ok:
            raise CannotProvoke(f"scontrol requeue {object_id}: {out.words()}")

    def nodes_of(self, object_id: str) -> list[str]:
        """The nodes the job runs on, in Slurm's order (the first is the batch node)."""
        listed = self.oob.run(
            ["squeue", "-h", "--states=all", "-j", object_id, "-o", "%N"]
        ).stdout.strip()
        if not listed:
            raise CannotProvoke(f"job {object_id} runs on no node")
        shown = self.oob.run(["scontrol", "show", "hostnames", listed])
        return shown.stdout.split()

    def lose(self, object_id: str, which: int = -1, how: str = "kill") -> str:
        """Lose one node of a running job for real (default: its last, a non-batch node
        when it has several); returns the node's name."""
        node = self.nodes_of(object_id)[which]
        lose_node(node, how)
        self.lost.append(node)
        return node

    def restore_nodes(self) -> None:
        """Bring back every node this provoker lost."""
        while self.lost:
            restore_node(self.lost.pop())

    def cleanup(self, object_ids: list[str]) -> None:
        ids = [o for o in object_ids if o]
        if ids:
            self.oob.run(["scancel", *ids])


def wait_for(
    discover: Callable[[list[str]], Discovery],
    job_ids: list[str],
    done: Callable[[dict[str, ObjectView]], bool],
    timeout: float = 90,
    interval: float = 1.0,
) -> dict[str, ObjectView]:
    """Discover until ``done`` holds on {job id: its newest object}.

    :raises TimeoutError: naming what the last discovery showed.
    """
    deadline = time.monotonic() + timeout
    while True:
        seen = {o.job_id: o for o in discover(job_ids).objects}
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            shown = {j: (o.phase.value, o.scheduler_state, o.cause) for j, o in seen.items()}
            raise TimeoutError(f"waited {timeout:g}s; last discovery: {shown}")
        time.sleep(interval)
