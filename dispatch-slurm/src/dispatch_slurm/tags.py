"""How a Slurm job is tagged with the dispatch job id and submission number (S-30, S-34).

Two fields carry the tag, chosen for what Slurm filters and shows:

- the **job name** ``dsp.<job id>`` is the same for every submission of a job, because it
  is the one user-set field both ``squeue -n`` and ``sacct --name`` filter on server-side:
  discovery asks for the names of N jobs in one call each, whatever N (S-32);
- the **comment** ``dispatch;job=<job id>;submission=<n>;gate=held|open`` says which
  submission the object is and whether dispatch's own gate still holds it. ``squeue``
  always shows the comment; ``sacct`` shows it once the job ended when the site stores
  comments (``AccountingStoreFlags=job_comment``), which is how objects that
  slurmctld has already forgotten (older than ``MinJobAge``) keep their submission.

A sweep's first submissions go as one job array (:meth:`SlurmBackend.dispatch_submit_array`):
its name is ``dsp.<group id>`` and its comment ``dispatch;array=<group id>;submission=1;
gate=open``; array task ``i`` is member ``<group id>-i`` (:func:`dispatch.sweep.member_id`).
Discovery asks for the group's name beside its members' names, and reads each task as
its member's object.

A job id is written as is when it only holds ``[A-Za-z0-9_.~:-]``; any other byte is
percent-escaped (``%XX`` of its UTF-8) so that no comma (the list separator of ``-n``),
``;`` or ``|`` can reach Slurm.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote

from dispatch import BadInput

NAME_PREFIX = "dsp."
COMMENT_PREFIX = "dispatch;"


def encode_job_id(job_id: str) -> str:
    if not job_id:
        raise BadInput("a dispatch job id may not be empty")
    return quote(job_id, safe=":")


def decode_job_id(text: str) -> str:
    return unquote(text) if "%" in text else text


def job_name(job_id: str) -> str:
    return NAME_PREFIX + encode_job_id(job_id)


@dataclass(frozen=True)
class Tag:
    job_id: str
    submission: int
    gated: bool = False

    def comment(self) -> str:
        gate = "held" if self.gated else "open"
        return (
            f"{COMMENT_PREFIX}job={encode_job_id(self.job_id)};"
            f"submission={self.submission};gate={gate}"
        )


@lru_cache(maxsize=65536)
def parse_comment(comment: str) -> Tag | None:
    """The tag in a Slurm comment, or None for a comment dispatch did not write."""
    if not comment.startswith(COMMENT_PREFIX):
        return None
    fields = dict(
        part.split("=", 1) for part in comment[len(COMMENT_PREFIX) :].split(";") if "=" in part
    )
    try:
        submission = int(fields["submission"])
        job = decode_job_id(fields["job"])
    except (KeyError, ValueError):
        return None
    if submission < 1 or not job:
        return None
    return Tag(job_id=job, submission=submission, gated=fields.get("gate") == "held")


@lru_cache(maxsize=65536)
def job_id_from_name(name: str) -> str | None:
    if not name.startswith(NAME_PREFIX) or len(name) == len(NAME_PREFIX):
        return None
    return decode_job_id(name[len(NAME_PREFIX) :])


def array_comment(group_id: str) -> str:
    """The comment of a sweep's array: every task is submission 1 of its member."""
    return f"{COMMENT_PREFIX}array={encode_job_id(group_id)};submission=1;gate=open"


@lru_cache(maxsize=65536)
def array_group(comment: str) -> str | None:
    """The group of an array's comment, or None for any other comment."""
    if not comment.startswith(COMMENT_PREFIX + "array="):
        return None
    fields = dict(
        part.split("=", 1) for part in comment[len(COMMENT_PREFIX) :].split(";") if "=" in part
    )
    group = decode_job_id(fields.get("array", ""))
    return group or None
