"""Whose commands a supervisor may run: only its own, on a backend that runs them as the
caller. Pure: the supervisor passes its uid and the backend's declaration in.

A backend that declares ``runs_as_caller`` (the local backend: each command is a child of
the process that submits it) runs every command as the Unix user of that process. So a
supervisor acts on such a job (asks about its objects, submits, opens gates, stops) only
when it runs as the job's submitter (``JobCreated.by.uid``):

- a supervisor running as root must never run a user's command as root;
- a supervisor running as another user would run the command as itself, cannot see the
  submitter's objects (they live in the submitter's state directory) and cannot stop them
  (``kill`` answers EPERM), so acting on the job would record endings that never happened.

Such a job is left alone, and the reason is recorded once as an escalation (a person must
act: run a supervisor as that user), never as a cause: nothing happened to the job.

On a record store with roles (PostgreSQL) the supervisor must also be connected as the
database role that created the job (``dispatch_jobs.owner_role``, which the database sets,
whatever the job's body claims). The uid in the body is what the submitting process
reported; the role is the database's own fact. So a user with a role of their own cannot
make another role's supervisor (an operator's, running as root) run their command by
writing a body that claims its uid: only users sharing one database role are told apart by
the reported uid alone.

A job recorded before submitters were recorded has no ``submitter``. A supervisor that is
not root acts on it as before (in a private SQLite record those are its own user's jobs);
a root supervisor refuses it, since it cannot tell whose command it would run as root.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.job import Job
from dispatch.model.events import EscalationRaised, Event, Identity

#: The actor named on the notice: dispatch itself, not a person.
ACTOR = "dispatch"


def refusal(
    job: Job,
    *,
    uid: int,
    runs_as_caller: bool,
    role: str | None = None,
    owner_role: str | None = None,
) -> str | None:
    """Why a supervisor running as ``uid`` (connected as database ``role``, where the
    store has roles) must not act on ``job``, created by database role ``owner_role``, in
    words a user can act on; None when it may (S-51)."""
    if not runs_as_caller:
        return None
    submitter = job.submitter
    same_uid = submitter.uid == uid if submitter is not None else uid != 0
    if same_uid and (role is None or owner_role is None or owner_role == role):
        return None
    if same_uid:
        return (
            f"created by database role {owner_role}; this supervisor connects as {role} and "
            f"runs {job.backend} jobs only for the role that created them: run `dispatch "
            "supervise` as their submitter, with that role"
        )
    who = (
        f"submitted by uid {submitter.uid}"
        if submitter is not None
        else "its submitter's uid is not recorded (recorded by an older dispatch)"
    )
    return (
        f"{who}; this supervisor runs as uid {uid} and runs {job.backend} jobs only as their "
        "submitter: run `dispatch supervise` as that user"
    )


def refusal_notice(job: Job, reason: str, *, by: Identity, now: datetime) -> list[Event]:
    """The escalation that records ``reason`` once: nothing if the job already has it."""
    if job.outcome is not None or any(e.reason == reason for e in job.escalations):
        return []
    return [
        EscalationRaised(
            job_id=job.job_id, seq=job.version + 1, at=now, actor=ACTOR, reason=reason, by=by
        )
    ]
