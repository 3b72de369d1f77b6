"""Private directories and files: what holds a record or a job's environment (S-51).

A state directory that another user created first (or can write) lets that user swap the
record and have our supervisor run their command, and a symlink planted there sends our
files wherever it points. So every directory dispatch keeps state in must be a real
directory (not a symlink), owned by the user running dispatch and writable by nobody else;
directories are created 0700 and files 0600, and each is checked after it is created,
since an attacker may have won the race to create it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from dispatch.model.errors import BadInput


class InsecureState(BadInput):
    """A state directory or file others could tamper with (S-51): refused, never used."""


def _user() -> int:
    return os.geteuid()


def check_private_dir(path: Path, what: str) -> os.stat_result:
    """Refuse ``path`` unless it is a real directory owned by the user that only the user
    can write; return its ``lstat``."""

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    if stat.S_ISLNK(st.st_mode):
        raise InsecureState(
            f"{what} {path} is a symbolic link; dispatch never follows symlinks where it keeps "
            "state (S-51); replace it with a real directory (mkdir -m 700)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise InsecureState(f"{what} {path} is not a directory")
    if st.st_uid != _user():
        raise InsecureState(
            f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {_user()}); "
            "another user could swap what dispatch reads there (S-51); remove it, or use a "
            "directory of your own"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InsecureState(
            f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"they could swap what dispatch reads there (S-51); run chmod 700 {path}"
        )
    return st


def private_dirs(directory: Path, what: str) -> None:
    """Create ``directory`` and its missing parents 0700, then check the directory itself.

    Existing parents are left as they are (they may be the user's home or ``/tmp``); the
    directory dispatch keeps state in, and every directory it creates, must pass
    ``check_private_dir``.
    """

    missing: list[Path] = []
    current = directory
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            check_private_dir(path, what)
            os.chmod(path, 0o700, follow_symlinks=False)
    check_private_dir(directory, what)


def private_mkdir(path: Path, what: str) -> None:
    """One directory 0700: created if missing, refused if it is not ours alone."""

    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        check_private_dir(path, what)
        return
    check_private_dir(path, what)
    os.chmod(path, 0o700, follow_symlinks=False)


def open_private(path: Path, flags: int, what: str) -> int:
    """``os.open`` with ``O_NOFOLLOW`` (a new file is 0600); a symlink, dangling or not,
    is refused and nothing is created at its target."""

    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InsecureState(
                f"{what} {path} is a symbolic link; dispatch never follows symlinks where it "
                "keeps state (S-51), so it neither reads nor creates its target; remove the "
                "link or name the real file"
            ) from None
        raise


def check_private_file(fd: int, path: Path, what: str) -> os.stat_result:
    """The file just opened must be a regular file of the user's."""

    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{what} {path} is not a regular file")
    if st.st_uid != _user():
        raise InsecureState(
            f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {_user()}); "
            "dispatch only uses its own files (S-51)"
        )
    return st
