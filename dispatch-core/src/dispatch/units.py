"""Parsing the units people type: ``--time 1:30:00`` or ``90m``, ``--mem 4G``."""

from __future__ import annotations

import re
from datetime import timedelta

from dispatch.errors import BadInput

_SUFFIX = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str, option: str = "--time") -> timedelta:
    """``SECONDS``, ``N[smhd]`` or Slurm-style ``[D-]HH:MM:SS`` / ``MM:SS``."""

    value = text.strip()
    match = re.fullmatch(r"(\d+)([smhd]?)", value)
    if match:
        return timedelta(seconds=int(match.group(1)) * _SUFFIX.get(match.group(2) or "s", 1))
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", value)
    if match:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    raise BadInput(f"{option} {text!r}: give seconds, N[smhd] (90m) or [D-]HH:MM:SS")


def megabytes(text: str, option: str = "--mem") -> int:
    match = re.fullmatch(r"(\d+)\s*([KMGT]?)i?B?", text.strip(), re.IGNORECASE)
    if not match or int(match.group(1)) == 0:
        raise BadInput(f"{option} {text!r}: give a size such as 512M or 4G")
    number, unit = int(match.group(1)), match.group(2).upper() or "M"
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[unit]
    return max(1, int(number * scale))
