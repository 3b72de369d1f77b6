"""Reading the files a user names (a policy, a script, a config file), safely (S-36).

A path on a command line can be anything: a FIFO nobody writes to (a plain ``open`` blocks
forever), ``/dev/zero`` (a read never ends), a directory, a file of gigabytes, bytes that
are not UTF-8, TOML nested deeply enough to exhaust the parser's recursion. Each is
refused here with the path, what it is and what was expected, before anything is recorded.

A file that steers dispatch (a config file, a profile's or a command line's policy) must
also be one the user trusts, as git's ``safe.directory`` asks of a repository: owned by
the user running dispatch or by root, and writable by nobody else. ``dispatch.toml`` is
looked for in every directory upward, so a file planted in a shared directory (``/tmp``)
would otherwise set ``notify.command`` for whoever runs dispatch below it (S-51).
"""

from __future__ import annotations

import os
import pwd
import stat
import tomllib
from pathlib import Path
from typing import Any

from dispatch.model.errors import BadInput

#: Bounds on what a user file may hold; far above any real policy, config or job script.
POLICY_LIMIT = 1 << 20
SCRIPT_LIMIT = 4 << 20
CONFIG_LIMIT = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def shown(path: str | os.PathLike[str]) -> str:
    """A path as text that can always be printed (undecodable bytes as ``\\xNN``)."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def check_trusted(path: str | os.PathLike[str], what: str, st: os.stat_result) -> None:
    """Refuse a file owned by another user than this one or root, or writable by group or
    others: its settings would act as whoever runs dispatch (see the module docstring)."""
    where = f"{what} {shown(path)}"
    me = os.geteuid()
    if st.st_uid not in (0, me):
        raise BadInput(
            f"{where}: owned by {_owner(st.st_uid)}, not by you ({_owner(me)}) or root; "
            "dispatch does not use settings another user can write. If you trust it, copy "
            "it to a file of your own (and name that one), or have its owner remove it"
        )
    if st.st_mode & 0o022:
        writable = (
            "group and others"
            if st.st_mode & 0o022 == 0o022
            else ("its group" if st.st_mode & 0o020 else "others")
        )
        raise BadInput(
            f"{where}: writable by {writable} (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"dispatch does not use settings another user can write: chmod go-w {shown(path)}"
        )


def read_bytes(
    path: str | os.PathLike[str], what: str, limit: int, *, trusted: bool = False
) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes.

    Opened non-blocking so a FIFO is seen for what it is instead of waited on. With
    ``trusted``, the file opened (a link's target) must pass :func:`check_trusted`.
    """
    where = f"{what} {shown(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadInput(f"{where}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{where}: cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        for test, kind in _KINDS:
            if test(st.st_mode):
                raise BadInput(f"{where}: is {kind}, not a regular file")
        if trusted:
            check_trusted(path, what, st)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise BadInput(f"{where}: larger than {limit // 1024} KiB")
            chunks.append(chunk)
    except OSError as exc:
        raise BadInput(f"{where}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], what: str, limit: int, *, trusted: bool = False) -> str:
    """A regular file's content as UTF-8 text; the error names the first bad byte's line."""
    data = read_bytes(path, what, limit, trusted=trusted)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInput(
            f"{what} {shown(path)}: not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, "
            f"offset {exc.start})"
        ) from None


def read_toml(
    path: str | os.PathLike[str], what: str, limit: int, *, trusted: bool = False
) -> dict[str, Any]:
    text = read_text(path, what, limit, trusted=trusted)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{shown(path)}: not valid TOML: {exc}") from None
    except RecursionError:
        raise BadInput(f"{shown(path)}: not valid TOML: nested too deeply") from None


def load_policy(path: str | os.PathLike[str]) -> Any:
    """A policy file, read safely, checked by :func:`dispatch.policy_file.parse_policy`."""
    from dispatch.policy_file import parse_policy

    data = read_toml(path, "policy file", POLICY_LIMIT, trusted=True)
    return parse_policy(data, where=shown(Path(path)))
