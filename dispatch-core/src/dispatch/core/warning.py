"""The warning a job asks for before its end, and what survives that end (S-44, S-45).

A long training run is ended every day by a time limit or a preemption; what saves its
work is a signal some time before the kill, a checkpoint, and a later execution that
resumes. :class:`EndWarning` is the "signal, and how long before the end" a job declares
(``--warn USR1@90s``); each backend carries it out its own way (docs/endings.md).

Only signals a program can catch and that mean nothing else to dispatch are accepted:
``KILL`` and ``STOP`` cannot be caught, ``CHLD``/``PIPE``/``SEGV``... are not warnings.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator

from dispatch.model.base import Model

#: Signals a job may ask to be warned with (names without ``SIG``), as Slurm spells them.
WARNING_SIGNALS = frozenset(
    {"HUP", "INT", "QUIT", "USR1", "USR2", "TERM", "ALRM", "CONT", "URG", "WINCH", "XCPU"}
)
#: The longest warning Slurm's ``--signal=SIG@SECONDS`` can hold (its field is 16 bits).
MAX_WARNING = timedelta(seconds=65535)


class EndWarning(Model):
    """Send ``signal`` ``before`` the end a scheduler or dispatch imposes (time limit,
    preemption, dispatch's own stop), and kill only then."""

    signal: str
    before: timedelta = Field(gt=timedelta(0), le=MAX_WARNING)

    @field_validator("signal")
    @classmethod
    def _catchable(cls, value: str) -> str:
        name = value.upper().removeprefix("SIG")
        if name not in WARNING_SIGNALS:
            raise ValueError(
                f"signal {value!r} is not one a job can be warned with; "
                f"use one of {', '.join(sorted(WARNING_SIGNALS))}"
            )
        return name

    @property
    def seconds(self) -> int:
        return max(1, int(self.before.total_seconds()))

    def describe(self) -> str:
        return f"SIG{self.signal} {self.seconds}s before the end"
