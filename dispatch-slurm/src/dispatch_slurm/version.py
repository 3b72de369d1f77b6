"""Which Slurm answers: its version, read once per discovery, and the rules it gets.

What Slurm prints changed between releases in ways that change a meaning (the
classification table's rows say which, with the versions they hold for). The adapter
never guesses which release it talks to: it asks (``sinfo --version``, a local call that
needs no controller), keeps the answer for :data:`VERSION_LIFETIME` seconds, and reads
every answer with that release's rules.

A release the adapter was never tested on is used with the classification rules of the
nearest tested release (:func:`rules_for`) and said so (:func:`untested_warning`), never
refused.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: seconds a version read stays valid (a cluster upgraded under a running supervisor is
#: read again within this)
VERSION_LIFETIME = 60.0

_VERSION = re.compile(
    r"^(?:slurm(?:-wlm)?)\s+([0-9]{1,4})\.([0-9]{1,2})(?:\.([0-9]{1,4}))?", re.ASCII
)


@dataclass(frozen=True, order=True)
class SlurmVersion:
    """A Slurm release ``major.minor`` (``24.11``) and its maintenance number."""

    major: int
    minor: int
    micro: int = 0

    @property
    def release(self) -> SlurmVersion:
        """The release this version belongs to (``24.11.7`` -> ``24.11``)."""
        return SlurmVersion(self.major, self.minor)

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor:02d}"
        return f"{base}.{self.micro}" if self.micro else base


def parse_version(text: str) -> SlurmVersion:
    """``sinfo --version`` as printed (``slurm 24.11.7``, Debian's ``slurm-wlm 22.05.8``).

    :raises ValueError: anything else, with what was printed.
    """
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"not a Slurm version: {text.strip()!r}")
    return SlurmVersion(int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def release(text: str) -> SlurmVersion:
    """``"24.11"`` as a release (for the tables' version ranges)."""
    major, _, minor = text.partition(".")
    return SlurmVersion(int(major), int(minor))


#: the releases the adapter is tested on, live and from recorded answers, oldest first
TESTED = (release("22.05"), release("24.11"), release("25.11"), release("26.05"))
#: the releases in order (two a year: .02/.05 and .11), to measure "nearest"
_RELEASES = tuple(
    release(r)
    for r in ("21.08 22.05 23.02 23.11 24.05 24.11 25.05 25.11 26.05 26.11 27.05 27.11".split())
)
#: the rules of the oldest tested release: what a caller that read no version gets
DEFAULT = TESTED[0]


def _position(version: SlurmVersion) -> float:
    rel = version.release
    if rel in _RELEASES:
        return float(_RELEASES.index(rel))
    # a release outside the list: by its date (major = year, minor = month)
    first = _RELEASES[0]
    months = (rel.major - first.major) * 12 + rel.minor - first.minor
    return months / 6.0


def rules_for(version: SlurmVersion) -> SlurmVersion:
    """The tested release whose classification rules read this version's answers: its
    own when tested, else the nearest tested one (the older one on a tie: a change is
    made in one release and kept after it, so a release between two tested ones has
    every change of the older one and maybe not the newer one's).

    Formats are not ruled by this: a format change is documented with the release that
    made it (:data:`dispatch_slurm.parse.SQUEUE_EXIT_PAIRS_SINCE`), and the parser reads
    the form of the version itself."""
    if version.release in TESTED:
        return version.release
    here = _position(version)
    return min(TESTED, key=lambda t: (abs(_position(t) - here), _position(t)))


def untested_warning(version: SlurmVersion) -> str | None:
    """What ``dispatch backends`` says of a version never tested; None for a tested one."""
    if version.release in TESTED:
        return None
    tested = ", ".join(str(t) for t in TESTED)
    return (
        f"Slurm {version} is not a tested version ({tested}): "
        f"its answers are read with the rules of {rules_for(version)}"
    )


class VersionCache:
    """The version, read by ``read`` at most once per :data:`VERSION_LIFETIME` seconds
    (``clock`` is injectable for tests)."""

    def __init__(
        self,
        read: Callable[[], SlurmVersion],
        lifetime: float = VERSION_LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._lifetime = lifetime
        self._clock = clock
        self._lock = threading.Lock()
        self._value: SlurmVersion | None = None
        self._at = 0.0

    def get(self) -> SlurmVersion:
        with self._lock:
            now = self._clock()
            if self._value is None or now - self._at >= self._lifetime:
                self._value = self._read()
                self._at = now
            return self._value
