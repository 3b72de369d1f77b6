"""Where the local backend keeps its state, and how files there are written.

The state directory is the local "scheduler": every process that runs or asks about local
objects (the CLI, a supervisor, the runners) meets only through these files, so each file
is written whole under a temporary name and then linked or renamed into place.

Those files hold a job's command and environment (S-51): the directories are the user's
own (0700, never a symlink, writable by nobody else, checked after they are created) and
every file is created 0600 without following a symlink. ``write_atomic`` and
``create_once`` check the directory they write into and the one above it (an object's
directory and ``objects/``, an index directory and ``jobs/``), so a symlink or another
user's directory planted there is refused before a byte is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from dispatch.model.errors import BadInput
from dispatch.store.permissions import InsecureState as InsecureState
from dispatch.store.permissions import check_private_dir, open_private, private_dirs
from dispatch.store.permissions import private_mkdir as _private_mkdir

OBJECT_ID = re.compile(r"^local-[0-9a-f]{12}$")
#: a job index's claim of one submission: holds the id of the one object published for it
CLAIM = re.compile(r"^submission-([1-9][0-9]*)$")


def claim_name(submission: int) -> str:
    return f"submission-{submission}"


def new_object_id() -> str:
    return f"local-{secrets.token_hex(6)}"


def check_object_id(object_id: str) -> str:
    """Refuse anything that is not one of our ids before it becomes part of a path."""
    if not isinstance(object_id, str) or not OBJECT_ID.match(object_id):
        raise BadInput(
            f"{object_id!r} is not a local object id (expected 'local-' and 12 hex digits)"
        )
    return object_id


def job_key(job_id: str) -> str:
    """A file name for a job id: readable when it can be, a digest when it cannot."""
    key = quote(job_id, safe="")
    if key in ("", ".", "..") or len(key) > 200:
        return "sha256-" + hashlib.sha256(job_id.encode()).hexdigest()
    return key


@dataclass(frozen=True)
class ObjectDir:
    """``<state>/objects/<object_id>/``: one submission's files."""

    path: Path

    @property
    def object_id(self) -> str:
        return self.path.name

    @property
    def meta(self) -> Path:
        return self.path / "meta.json"

    @property
    def runner(self) -> Path:
        return self.path / "runner.json"

    @property
    def started(self) -> Path:
        return self.path / "started.json"

    @property
    def end(self) -> Path:
        return self.path / "end.json"

    @property
    def stop(self) -> Path:
        return self.path / "stop.json"

    @property
    def gate(self) -> Path:
        return self.path / "gate-open"

    @property
    def script(self) -> Path:
        return self.path / "script"

    @property
    def stdout(self) -> Path:
        return self.path / "stdout"

    @property
    def stderr(self) -> Path:
        return self.path / "stderr"

    @property
    def runner_log(self) -> Path:
        return self.path / "runner.log"


@dataclass(frozen=True)
class StateDir:
    """``<state>/objects/<id>/`` per object, ``<state>/jobs/<job key>/<id>`` per job.

    The job index lets discovery read only the objects of the jobs it is asked about: its
    cost follows those jobs, not every object ever run on the machine. An index entry's
    content is the submission number, so an object whose ``meta.json`` no longer decodes
    can still be reported under its job and submission.
    """

    root: Path

    @property
    def objects(self) -> Path:
        return self.root / "objects"

    @property
    def jobs(self) -> Path:
        return self.root / "jobs"

    def object_dir(self, object_id: str) -> ObjectDir:
        return ObjectDir(self.objects / check_object_id(object_id))

    def job_index(self, job_id: str) -> Path:
        return self.jobs / job_key(job_id)

    def prepare(self) -> None:
        """Create the root, ``objects/`` and ``jobs/`` 0700 where missing, and refuse any of
        them that is a symlink, another user's or writable by others (S-51). Call before
        the first write."""
        private_dirs(self.root, "local state directory")
        for path in (self.objects, self.jobs):
            private_mkdir(path)

    def check(self) -> None:
        """``prepare`` without creating: refuse the directories that exist and are unsafe."""
        for path in (self.root, self.objects, self.jobs):
            if os.path.lexists(path):
                check_private_dir(path, "local state directory")


def private_mkdir(path: Path) -> None:
    """One state directory 0700 (an object's, a job index's): created if missing, refused
    if it is a symlink, another user's or writable by others (S-51)."""
    _private_mkdir(path, "local state directory")


def present(path: Path) -> bool:
    """Whether ``path`` exists; unlike ``Path.exists`` an error other than "no such file"
    (a state directory replaced by a file, an unmounted share, an I/O error) is raised, so
    the hooks report it as ``Unreachable`` instead of answering "absent"."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    return True


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _check_parents(path: Path) -> None:
    """The directory ``path`` goes into and the one above it must be the user's alone; the
    first is narrowed to 0700 (it holds one job's files)."""
    parent = path.parent
    st = check_private_dir(parent, "local state directory")
    if st.st_mode & 0o077:
        os.chmod(parent, 0o700, follow_symlinks=False)
    check_private_dir(parent.parent, "local state directory")


def _write_temporary(path: Path, text: str) -> Path:
    _check_parents(path)
    tmp = _temporary(path)
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, "local state file")
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step."""
    tmp = _write_temporary(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_once(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` unless it exists; True if this call created it.

    A hard link never replaces its target, so of two writers racing (the runner and a
    backend that found it gone, two stop requests) exactly one wins, and readers never see
    a partial file.
    """
    tmp = _write_temporary(path, text)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True
