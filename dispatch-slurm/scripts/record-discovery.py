"""Record what one discovery of the given dispatch job ids printed, for offline tests.

    python dispatch-slurm/scripts/record-discovery.py OUT_PREFIX JOB_ID...

writes OUT_PREFIX.version (``sinfo --version``), OUT_PREFIX.squeue, OUT_PREFIX.sacct,
(when a job runs) OUT_PREFIX.sinfo and (when an ending is attributed to a node)
OUT_PREFIX.steps and OUT_PREFIX.sacctmgr: the exact stdout of the commands
``SlurmBackend.dispatch_discover`` ran on the real Slurm.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.runner import Result, Runner


class RecordingRunner(Runner):
    def __init__(self) -> None:
        super().__init__()
        self.outputs: dict[str, str] = {}

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        check_unreachable: bool = True,
        inherit_env: bool = True,
    ) -> Result:
        result = super().run(
            argv, stdin=stdin, env=env, check_unreachable=check_unreachable, inherit_env=inherit_env
        )
        name = "steps" if argv[0] == "sacct" and "-j" in argv else argv[0]
        if list(argv[1:]) == ["--version"]:
            name = "version"
        self.outputs[name] = result.stdout
        return result


def main() -> None:
    prefix, job_ids = sys.argv[1], sys.argv[2:]
    runner = RecordingRunner()
    found = SlurmBackend(runner).dispatch_discover(job_ids)
    for command, stdout in runner.outputs.items():
        Path(f"{prefix}.{command}").write_text(stdout)
    for obj in found.objects:
        cause = obj.cause.kind.value if obj.cause else "-"
        print(obj.job_id, obj.object_id, obj.phase.value, cause, len(obj.executions))


if __name__ == "__main__":
    main()
