"""A 1,000-member sweep on Slurm: one job array against 1,000 separate jobs. Counts the
Slurm commands the adapter runs (its runner's call counter) to record and submit the
sweep, and for one discovery of its members afterwards; prints wall and CPU time of each.

    python benchmarks/sweep_submit.py [--members 1000] [--max-running 50]

Slurm is simulated (a runner answering sbatch, squeue, sacct, sinfo and scontrol the way
26.05 prints them, keeping the jobs it was given): the calls are what the adapter would
run on a real cluster, and the times are dispatch's own (recording, building the sbatch,
parsing the listings), not Slurm's. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dispatch import Client, JobSpec, RecoveryPolicy, Registry
from dispatch.job_records import create_job
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.runner import Result, Runner

STAMP = "2026-12-02T01:00:00"


@dataclass
class _Job:
    id: str
    name: str
    comment: str
    tasks: tuple[int, ...] = ()
    bound: int | None = None


class SimulatedSlurm(Runner):
    """Answers the adapter's commands from the jobs sbatch was given: every job runs at
    once, an array runs its first ``%K`` tasks and shows the rest as one pending row."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[_Job] = []
        self.next_id = 1000

    def run(self, argv: Sequence[str], **_: object) -> Result:
        with self._lock:
            self.calls += 1
            self.calls_by_command[argv[0]] = self.calls_by_command.get(argv[0], 0) + 1
        return Result(tuple(argv), 0, self._answer(list(argv)), "")

    def _answer(self, argv: list[str]) -> str:
        if argv[:2] == ["sinfo", "--version"]:
            return "slurm 26.05.3\n"
        if argv[0] == "sinfo":
            return "".join(f"node{n}|allocated|none\n" for n in range(1, 5))
        if argv[:3] == ["scontrol", "show", "config"]:
            return "MaxArraySize            = 1001\n"
        option = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if "=" in a}
        if argv[0] == "sbatch":
            self.next_id += 1
            tasks: tuple[int, ...] = ()
            bound = None
            if "--array" in option:
                spec, _, limit = option["--array"].partition("%")
                tasks = tuple(int(t) for t in spec.split(","))
                bound = int(limit) if limit else None
            self.jobs.append(
                _Job(str(self.next_id), option["--job-name"], option["--comment"], tasks, bound)
            )
            return f"{self.next_id}\n"
        names = set(option.get("--name", "").split(","))
        rows: list[str] = []
        for job in self.jobs:
            if job.name not in names:
                continue
            if not job.tasks:
                rows.append(self._row(argv[0], job.id, job, "RUNNING"))
                continue
            running = job.tasks[: job.bound] if job.bound else job.tasks
            rows += [self._row(argv[0], f"{job.id}_{t}", job, "RUNNING") for t in running]
            rest = job.tasks[len(running) :]
            if rest and argv[0] == "squeue":
                gathered = f"{job.id}_[{rest[0]}-{rest[-1]}%{job.bound}]"
                rows.append(self._row("squeue", gathered, job, "PENDING"))
        return "".join(rows)

    @staticmethod
    def _row(command: str, object_id: str, job: _Job, state: str) -> str:
        node = "node1" if state == "RUNNING" else ""
        start = STAMP if state == "RUNNING" else "N/A"
        if command == "squeue":
            reason = "None" if state == "RUNNING" else "JobArrayTaskLimit"
            return (
                f"{object_id}|{job.name}|{state}|0:0|0:0|0|{STAMP}|{start}|NONE|{node}|low|"
                f"{job.comment}|{reason}|\n"
            )
        return f"{object_id}|{job.name}|{state}|0:0|0:0|{STAMP}|{start}|Unknown|{node}|low|\n"


def _measure(what: str, runner: SimulatedSlurm, action) -> dict[str, float]:  # type: ignore[no-untyped-def]
    before = dict(runner.calls_by_command)
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    calls = {k: v - before.get(k, 0) for k, v in runner.calls_by_command.items()}
    calls = {k: v for k, v in calls.items() if v}
    print(
        f"  {what:<34} {sum(calls.values()):>5} calls {calls}  wall {wall:6.2f} s  cpu {cpu:6.2f} s"
    )
    return {"calls": sum(calls.values()), "wall": wall, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--max-running", type=int, default=50)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="dispatch-sweep-bench-")
    os.environ["DISPATCH_SLURM_LOG_DIR"] = os.path.join(work, "logs")
    template = JobSpec(command=("python", "train.py", "--seed", "{seed}"))
    grid = f"seed=0..{args.members - 1}"

    print(f"{args.members} members, at most {args.max_running} running")
    print("one job array (a sweep):")
    runner = SimulatedSlurm()
    registry = Registry.from_plugins({"slurm": SlurmBackend(runner)})
    client = Client(f"sqlite:///{work}/array.db", registry=registry, actor="bench")
    made: list[list[str]] = []
    _measure(
        "record + submit (one tick)",
        runner,
        lambda: made.append(
            client.sweep_spec(
                template,
                grid,
                backend="slurm",
                policy=RecoveryPolicy(),
                max_running=args.max_running,
            ).job_ids
        ),
    )
    backend = registry.get("slurm")
    _measure("one discovery of every member", runner, lambda: backend.discover(made[0]))
    arrays = [j for j in runner.jobs if j.tasks]
    print(f"  sbatch made {len(runner.jobs)} job(s), {len(arrays)} array(s)")

    print(f"{args.members} separate jobs:")
    runner = SimulatedSlurm()
    registry = Registry.from_plugins({"slurm": SlurmBackend(runner)})
    client = Client(f"sqlite:///{work}/single.db", registry=registry, actor="bench")
    ids: list[str] = []

    def separate() -> None:
        for seed in range(args.members):
            spec = template.model_copy(
                update={"command": ("python", "train.py", "--seed", str(seed))}
            )
            ids.append(
                create_job(
                    client.store, registry, backend="slurm", spec=spec, policy=RecoveryPolicy()
                )
            )
        client.start_many(ids)

    _measure("record + submit (one tick)", runner, separate)
    single = registry.get("slurm")
    _measure("one discovery of every job", runner, lambda: single.discover(ids))
    print(f"  sbatch made {len(runner.jobs)} job(s)")


if __name__ == "__main__":
    main()
