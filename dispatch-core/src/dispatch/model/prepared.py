"""What one submission sends, built once: ``dispatch_prepare`` makes it, ``dispatch_send``
sends exactly it, and ``dispatch submit --dry-run`` prints it.

A backend names its parts (``"sbatch"``, ``"batch script"``, ``"TrainJob"``...), each one
of three shapes: a text (a script), an argv (a list of words, shown shell-quoted), or a
mapping (an environment, a manifest). ``notes`` say what is decided only when it is sent
(a temporary file's path, the submitter's own environment), in words.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from pydantic import Field

from dispatch.model.base import Model

#: A part's value: a text, an argv, or a JSON-shaped mapping.
Part = str | list[str] | dict[str, Any]


class Prepared(Model):
    """What ``dispatch_send`` will send for submission ``submission`` of ``job_id``."""

    backend: str = Field(min_length=1)
    job_id: str = Field(min_length=1)
    submission: int = Field(ge=1)
    gated: bool
    #: what is sent, by name, in the order it is shown
    parts: dict[str, Part]
    #: what is decided only when it is sent, in words
    notes: tuple[str, ...] = ()

    def text(self, name: str) -> str:
        value = self.parts[name]
        if not isinstance(value, str):
            raise TypeError(f"part {name!r} is not a text")
        return value

    def words(self, name: str) -> list[str]:
        value = self.parts[name]
        if not isinstance(value, list):
            raise TypeError(f"part {name!r} is not an argv")
        return list(value)

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.parts[name]
        if not isinstance(value, dict):
            raise TypeError(f"part {name!r} is not a mapping")
        return dict(value)

    def render(self) -> str:
        """The parts as text, for people: each under its name."""
        lines: list[str] = []
        for name, value in self.parts.items():
            lines.append(f"--- {name} ---")
            if isinstance(value, str):
                lines.append(value.rstrip("\n"))
            elif isinstance(value, list):
                lines.append(shlex.join(value))
            elif all(isinstance(v, str) for v in value.values()):
                lines += [shlex.quote(f"{k}={v}") for k, v in value.items()]
            else:
                lines.append(json.dumps(value, indent=2))
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines) + "\n"
