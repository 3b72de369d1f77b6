"""A scheduler that flaps under a supervisor: the campaign and its checks (S-5).

Jobs of one or two nodes, recorded with a policy that resubmits on every ending it may
(``unknown`` is held: nobody can say a resubmit would mend it), run on the test cluster
under one ``dispatch supervise`` process. Meanwhile slurmctld is stopped and started
again, or frozen with SIGSTOP and thawed, in turns (``start-slurm.sh ctld``, the selected
version's controller only). While it is down, ``dispatch status`` of a job not ended must
show what the record knows, say that the scheduler is unreachable (its words, since when)
and exit 3, appending nothing.

Every job must end as it would have without the flaps: succeeded, one submission, one
Slurm object that ran once on its nodes, and a record with nothing but its creation, its
submission and its outcome, its events numbered without a gap. Each tick the supervisor
prints (``--json``) is timed: wall from its start to its line, CPU of the supervisor and
its Slurm commands between two lines; the worst ticks while the controller was frozen,
stopped and up are reported, never asserted.

The driver is :mod:`dispatch_testing.campaign`; what is Slurm's own is here. Used by
``benchmarks/slurm_flapping.py`` (the full campaign) and by the live test (a shorter one).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from dispatch_testing import campaign
from dispatch_testing.campaign import Flap, Result, Tick

from dispatch_slurm_testing.cluster import start_script

__all__ = ["Campaign", "Flap", "Plan", "Result", "Tick", "ctld"]


@dataclass
class Plan:
    """What a campaign does: ``flaps`` outages spread over ``span`` seconds, each down for
    at least ``down`` seconds, under ``jobs`` jobs sleeping ``job_seconds`` each."""

    jobs: int = 40
    flaps: int = 20
    span: float = 600.0
    down: float = 12.0
    job_seconds: tuple[int, int] = (40, 150)
    interval: float = 2.0
    lease: float = 60.0
    settle: float = 1800.0
    seed: int = 1


def ctld(action: str) -> None:
    """``start-slurm.sh ctld ACTION`` on the selected version's cluster."""
    done = subprocess.run(
        ["bash", str(start_script()), "ctld", action],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"start-slurm.sh ctld {action}: {done.stdout}{done.stderr}")


class Campaign(campaign.Campaign[Plan, int]):
    """One campaign on the cluster ``sinfo`` reaches (``start-slurm.sh env`` picks it);
    its jobs are kept with their nodes."""

    backend = "slurm"
    flap_labels: ClassVar[dict[str, str]] = {
        "stop": "slurmctld stopped, started",
        "freeze": "slurmctld frozen, thawed",
    }
    tick_names: ClassVar[dict[str, str]] = {"freeze": "frozen", "stop": "stopped"}
    well = "up"
    went_down = "the controller went down"
    not_reached = "the supervisor did not reach Slurm again after it came back"

    def __init__(self, plan: Plan, say: Any = None) -> None:
        super().__init__(plan, self.workdir("dispatch-flapping-", "/var/tmp"), say)
        self.runs = self.work / "runs.txt"
        if "DISPATCH_SLURM_DIR" in os.environ:  # which cluster start-slurm.sh acts on
            self.env["DISPATCH_SLURM_DIR"] = os.environ["DISPATCH_SLURM_DIR"]
        #: nodes Slurm drained during the campaign (once per drain), resumed once the
        #: controller is back after each outage, while the jobs settle, and at the end
        self.resumed: list[str] = []

    def record(self) -> None:
        from dispatch import Client

        policy = self.write_policy()
        low, high = self.plan.job_seconds
        with Client(self.env["DISPATCH_STORE"]) as client:
            for i in range(self.plan.jobs):
                nodes = 1 + i % 2
                line = '"$DISPATCH_JOB_ID $DISPATCH_SUBMISSION $DISPATCH_EXECUTION $SLURM_JOB_ID'
                script = f'echo {line} $RANK" >> {self.runs}; sleep {self.rng.randint(low, high)}'
                handle = client.submit(
                    ["sh", "-c", script],
                    backend="slurm",
                    policy=str(policy),
                    start=False,
                    name=f"flap-{i}",
                    workdir=str(self.work),
                    resources={"nodes": nodes, "cpus_per_task": 4},
                    options={"output": f"{self.work}/%j.out", "partition": "low"},
                )
                self.jobs[handle.job_id] = nodes

    def misbehave(self, mode: str) -> None:
        ctld("stop" if mode == "stop" else "freeze")

    def behave(self, mode: str) -> None:
        ctld("start" if mode == "stop" else "thaw")

    def tend(self) -> None:
        self.resumed += self.resume_drained()

    def pause_settling(self) -> None:
        time.sleep(5)

    def own_details(self) -> dict[str, Any]:
        return {"nodes Slurm drained (Kill task failed), resumed": len(self.resumed)}

    def _slurm_objects(self) -> dict[str, list[tuple[str, str]]]:
        """Each job's Slurm jobs as accounting lists them: (id, state)."""
        names = ",".join(f"dsp.{j}" for j in self.jobs)
        done = subprocess.run(
            [
                "sacct",
                "-X",
                "-n",
                "-P",
                "-S",
                "now-1days",
                f"--name={names}",
                "-o",
                "JobID,JobName,State",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        found: dict[str, list[tuple[str, str]]] = {j: [] for j in self.jobs}
        for line in done.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].startswith("dsp."):
                found.setdefault(parts[1][4:], []).append((parts[0], parts[2]))
        return found

    def judge(self, object_ids: dict[str, str | None]) -> list[tuple[str, str, list[str]]]:
        """Each job ran once on each of its nodes, as one Slurm object that completed."""
        ran: dict[str, Counter[tuple[str, str, str]]] = {j: Counter() for j in self.jobs}
        if self.runs.exists():
            for line in self.runs.read_text().splitlines():
                parts = line.split()
                if len(parts) == 5 and parts[0] in ran:
                    ran[parts[0]][(parts[1], parts[2], parts[3])] += 1
        objects = self._slurm_objects()
        not_once: list[str] = []
        not_completed: list[str] = []
        for job_id, nodes in self.jobs.items():
            object_id = object_ids[job_id]
            runs = ran[job_id]
            once = ("1", "0", object_id or "?")  # submission 1, its first execution
            if list(runs) != [once] or runs[once] != nodes:
                not_once.append(f"{job_id} ({object_id}): {dict(runs)}")
            if objects.get(job_id) != [(object_id, "COMPLETED")]:
                not_completed.append(f"{job_id} ({object_id}): {objects.get(job_id)}")
        return [
            ("ran", "ran once, on every node", not_once),
            ("object", "one Slurm object, completed", not_completed),
        ]

    def cancel(self) -> None:
        """Stop the supervisor if it still runs, cancel what is left of the jobs."""
        self._stop_supervisor()
        if self.jobs:
            names = ",".join(f"dsp.{j}" for j in self.jobs)
            subprocess.run(
                ["scancel", f"--name={names}"], capture_output=True, timeout=120, check=False
            )
        self.resumed += self.resume_drained()

    def resume_drained(self) -> list[str]:
        """Resume the nodes Slurm drained with "Kill task failed" (a step that could not
        report its end to the absent controller outlived UnkillableStepTimeout), so the
        tests after this one find every node; the nodes resumed."""
        listed = subprocess.run(
            ["sinfo", "-h", "-R", "-o", "%N|%E"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        nodes = [
            line.split("|", 1)[0]
            for line in listed.stdout.splitlines()
            if line.partition("|")[2].strip() == "Kill task failed"
        ]
        for node in nodes:
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=resume"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        return nodes
