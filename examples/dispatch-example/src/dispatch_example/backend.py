"""A third-party backend: the "scheduler" is one JSON file, each command a thread's child.

The file maps an object id to what the scheduler knows: the tags (job id, submission),
a state word (``running``, ``exited``, ``killed``, ``not-started``), the exit status and
the scheduler's words. Discovery reads the file once for any number of jobs. A file that
cannot be read is an unreachable scheduler; a state word this adapter does not know is
reported ``unknown`` with the word verbatim.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dispatch import (
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    Execution,
    JobSpec,
    ObjectView,
    Phase,
    Prepared,
    Provenance,
    SubmitRefused,
    Unreachable,
    hookimpl,
)
from dispatch.hookspecs import API_VERSION

NAME = "example"


def _now() -> datetime:
    return datetime.now(UTC)


class ExampleBackend:
    def __init__(self, path: str | Path | None = None) -> None:
        default = Path(tempfile.gettempdir()) / "dispatch-example" / "scheduler.json"
        self.path = Path(path or os.environ.get("DISPATCH_EXAMPLE_FILE") or default)
        self.reads = 0
        self._lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- the scheduler file ----------------------------------------------------------------

    def _load(self) -> dict[str, dict[str, Any]]:
        self.reads += 1
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}  # nothing submitted yet
        except OSError as exc:
            raise Unreachable(f"example scheduler file {self.path}: {exc}") from exc

    def _update(self, object_id: str, **fields: Any) -> None:
        with self._lock:
            table = self._load()
            table.setdefault(object_id, {}).update(fields)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(f".{uuid.uuid4().hex}.tmp")
                tmp.write_text(json.dumps(table))
                os.replace(tmp, self.path)
            except OSError as exc:
                raise Unreachable(f"example scheduler file {self.path}: {exc}") from exc

    def _run(self, object_id: str, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        stopped = self._procs.pop(object_id, None) is None
        state = "killed" if stopped else "exited"
        self._update(object_id, state=state, returncode=code, ended=_now().isoformat())

    # -- hooks ----------------------------------------------------------------------------

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name=NAME,
            description="commands run by the submitting process, listed in one JSON file",
            api_version=API_VERSION,
            node_loss_window=timedelta(minutes=1),
            reports=frozenset(
                {
                    CauseKind.NONE,
                    CauseKind.NON_ZERO_EXIT,
                    CauseKind.LAUNCH_FAILED,
                    CauseKind.CANCELLED,
                    CauseKind.UNKNOWN,
                }
            ),
        )

    @hookimpl
    def dispatch_prepare(
        self, job_id: str, submission: int, spec: JobSpec, gated: bool
    ) -> Prepared:
        """What the submit will do, decided here and nowhere else: the object's id, the
        argv, the environment added, the script's text. ``dispatch submit --dry-run``
        prints it and :meth:`dispatch_send` does exactly it."""
        r = spec.resources
        asked = {
            "gating": gated,
            "more than one node": r.nodes > 1,
            "GPUs": bool(r.gpus_per_node),
            "a time limit": r.time_limit is not None,
            "excluded nodes": bool(spec.exclude_nodes),
        }
        cannot = [what for what, wanted in asked.items() if wanted]
        if cannot:
            # SubmitRefused, as the hook spec says: dispatch records the job as failed
            raise SubmitRefused(f"the example scheduler cannot do: {', '.join(cannot)}")
        object_id = f"ex-{uuid.uuid4().hex[:10]}"
        argv = list(spec.command) if spec.command else [str(self._script_path(object_id))]
        parts: dict[str, Any] = {
            "object": {"id": object_id, "job": job_id, "submission": submission},
            "argv": argv,
            "environment": dict(spec.env),
        }
        if spec.script is not None:
            parts["script"] = spec.script
        return Prepared(
            backend=NAME,
            job_id=job_id,
            submission=submission,
            gated=gated,
            parts=parts,
            notes=("the command's environment is the submitting process's, `environment` on top",),
        )

    @hookimpl
    def dispatch_send(self, prepared: Prepared) -> str:
        object_id = str(prepared.mapping("object")["id"])
        self._update(
            object_id,
            job=prepared.job_id,
            submission=prepared.submission,
            created=_now().isoformat(),
        )
        if "script" in prepared.parts:
            self._write_script(object_id, prepared.text("script"))
        try:
            proc = subprocess.Popen(
                prepared.words("argv"), env={**os.environ, **prepared.mapping("environment")}
            )
        except OSError as exc:
            self._update(object_id, state="not-started", detail=str(exc))
            return object_id
        self._procs[object_id] = proc
        self._update(object_id, state="running", started=_now().isoformat())
        threading.Thread(target=self._run, args=(object_id, proc), daemon=True).start()
        return object_id

    def _script_path(self, object_id: str) -> Path:
        return self.path.parent / "scripts" / object_id

    def _write_script(self, object_id: str, text: str) -> None:
        """``spec.script`` is the script's text: written to a file and exec'd, so its own
        ``#!`` line picks the interpreter (a script without one fails to launch)."""
        path = self._script_path(object_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o700)

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        wanted = set(job_ids)
        table = self._load()
        objects = [
            self._view(object_id, row)
            for object_id, row in table.items()
            if row.get("job") in wanted and row.get("state")
        ]
        return Discovery(backend=NAME, at=_now(), objects=tuple(objects))

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        self._load()  # nothing is ever gated here; only check the scheduler answers

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        self._load()
        proc = self._procs.pop(object_id, None)
        if proc is not None:
            self._update(object_id, stop_actor=cause.actor or "dispatch", stop_detail=cause.detail)
            proc.kill()

    # -- mapping --------------------------------------------------------------------------

    def _view(self, object_id: str, row: dict[str, Any]) -> ObjectView:
        state = str(row["state"])
        started = datetime.fromisoformat(row["started"]) if "started" in row else None
        ended = datetime.fromisoformat(row["ended"]) if "ended" in row else None
        code = row.get("returncode")
        exit_code = 128 - code if isinstance(code, int) and code < 0 else code
        phase, cause = Phase.ENDED, None
        if state == "running":
            phase = Phase.RUNNING
        elif state == "exited" and exit_code == 0:
            cause = Cause(kind=CauseKind.NONE, provenance=Provenance.APPLICATION, exit_code=0)
        elif state == "exited":
            cause = Cause(
                kind=CauseKind.NON_ZERO_EXIT,
                provenance=Provenance.APPLICATION,
                exit_code=exit_code,
                detail=f"exit status {exit_code}",
            )
        elif state == "killed":
            cause = Cause(
                kind=CauseKind.CANCELLED,
                provenance=Provenance.ACTOR,
                actor=row.get("stop_actor"),
                detail=row.get("stop_detail") or "stopped by dispatch",
            )
        elif state == "not-started":
            cause = Cause(
                kind=CauseKind.LAUNCH_FAILED,
                provenance=Provenance.SCHEDULER,
                detail=str(row.get("detail") or state),
            )
        else:
            phase = Phase.ENDED if ended else Phase.RUNNING
            cause = Cause(kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=state)
        if cause is not None:
            cause = cause.model_copy(update={"at": ended or _now()})
        execution = Execution(
            index=0,
            started_at=started,
            ended_at=ended,
            cause=cause if phase is Phase.ENDED else None,
        )
        return ObjectView(
            object_id=object_id,
            job_id=str(row["job"]),
            submission=int(row["submission"]),
            phase=phase,
            scheduler_state=state,
            cause=cause,
            executions=(execution,) if started else (),
            created_at=datetime.fromisoformat(row["created"]),
        )
