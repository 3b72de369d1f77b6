"""Record what one discovery of the given dispatch job ids printed, for offline tests.

    python dispatch-slurm/scripts/record-discovery.py OUT_PREFIX JOB_ID...
    python dispatch-slurm/scripts/record-discovery.py --release DIR

The second form records a whole release, after its live tests ran on its cluster: every
dispatch job slurmctld still lists (but the 60 of the discovery-cost test), into
DIR/tick.*, and DIR/expected.tsv with what the adapter made of each (phase, cause kind,
exit code), which the offline tests then hold every later parser to.

writes OUT_PREFIX.version (``sinfo --version``), OUT_PREFIX.squeue, OUT_PREFIX.sacct,
(when a job runs) OUT_PREFIX.sinfo and (when an ending is attributed to a node)
OUT_PREFIX.steps and OUT_PREFIX.sacctmgr: the exact stdout of the commands
``SlurmBackend.dispatch_discover`` ran on the real Slurm.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.observe import build_objects
from dispatch_slurm.runner import Result, Runner
from dispatch_slurm.tags import job_id_from_name
from dispatch_slurm.version import parse_version


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
        # a second call of one kind (the step rows asked early, then late) adds to the
        # first, as the discovery itself joins them
        self.outputs[name] = self.outputs.get(name, "") + result.stdout
        return result


def _listed_job_ids() -> list[str]:
    shown = Runner().run(["squeue", "-h", "--states=all", "-o", "%j"])
    ids = (job_id_from_name(name) for name in shown.stdout.split())
    return sorted({i for i in ids if i is not None and not i.startswith("live-many-")})


def _expected(prefix: str, job_ids: list[str]) -> str:
    def read(what: str) -> str:
        path = Path(f"{prefix}.{what}")
        return path.read_text() if path.is_file() else ""

    objects = build_objects(
        read("squeue"),
        read("sacct"),
        None,
        set(job_ids),
        datetime(2030, 1, 1, tzinfo=UTC),
        steps_text=read("steps"),
        events_text=read("sacctmgr"),
        version=parse_version(read("version")),
    )
    lines = ["job\tsubmission\tphase\tcause\texit_code"]
    for o in sorted(objects, key=lambda o: (o.job_id, o.submission)):
        cause = o.cause.kind.value if o.cause else "-"
        code = o.cause.exit_code if o.cause and o.cause.exit_code is not None else "-"
        lines.append(f"{o.job_id}\t{o.submission}\t{o.phase.value}\t{cause}\t{code}")
    return "\n".join(lines) + "\n"


def main() -> None:
    if sys.argv[1] == "--release":
        directory = Path(sys.argv[2])
        directory.mkdir(parents=True, exist_ok=True)
        prefix, job_ids = str(directory / "tick"), _listed_job_ids()
    else:
        prefix, job_ids = sys.argv[1], sys.argv[2:]
    runner = RecordingRunner()
    found = SlurmBackend(runner).dispatch_discover(job_ids)
    for command, stdout in runner.outputs.items():
        Path(f"{prefix}.{command}").write_text(stdout)
    for obj in found.objects:
        cause = obj.cause.kind.value if obj.cause else "-"
        print(obj.job_id, obj.object_id, obj.phase.value, cause, len(obj.executions))
    if sys.argv[1] == "--release":
        (directory / "expected.tsv").write_text(_expected(prefix, job_ids))


if __name__ == "__main__":
    main()
