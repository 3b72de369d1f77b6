"""Parsing the units people type: ``--time 1:30:00`` or ``90m``, ``--mem 4G``, seconds.

Every parser refuses what no scheduler could honour (zero, negative, not a number,
infinite, or beyond the bound below) with the option and the value in the message (S-36).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from dispatch.model.errors import BadInput

_SUFFIX = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: The longest time limit accepted: a year. Leave the limit unset for "no limit".
MAX_DURATION = timedelta(days=365)
#: The largest memory per node accepted: 1 PiB, in MiB.
MAX_MEGABYTES = 1 << 30


def duration(text: str, option: str = "--time") -> timedelta:
    """``SECONDS``, ``N[smhd]`` or Slurm-style ``[D-]HH:MM:SS`` / ``MM:SS``; more than 0."""

    value = text.strip()
    seconds: int | None = None
    match = re.fullmatch(r"(\d+)([smhd]?)", value)
    if match:
        seconds = _number(match.group(1)) * _SUFFIX[match.group(2) or "s"]
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", value)
    if match:
        days, hours, minutes, secs = (_number(g) if g else 0 for g in match.groups())
        inner = [secs] + ([minutes] if match.group(2) else [])
        if any(v >= 60 for v in inner) or (match.group(1) and hours >= 24):
            raise BadInput(
                f"{option} {text!r}: in [D-]HH:MM:SS the minutes and seconds are below 60 "
                "and, after days, the hours below 24"
            )
        seconds = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if seconds is None:
        raise BadInput(f"{option} {text!r}: give seconds, N[smhd] (90m) or [D-]HH:MM:SS")
    if seconds == 0:
        raise BadInput(f"{option} {text!r}: a time limit must be more than 0 (omit it for none)")
    if seconds > MAX_DURATION.total_seconds():
        raise BadInput(
            f"{option} {text!r}: longer than {MAX_DURATION.days} days (omit it for no limit)"
        )
    return timedelta(seconds=seconds)


def _number(digits: str) -> int:
    """Digits as an int; absurdly many count as "too large" (int() refuses > 4300 digits)."""
    return int(digits) if len(digits) <= 18 else 10**18


def megabytes(text: str, option: str = "--mem") -> int:
    match = re.fullmatch(r"(\d+)\s*([KMGT]?)i?B?", text.strip(), re.IGNORECASE)
    if not match or _number(match.group(1)) == 0:
        raise BadInput(f"{option} {text!r}: give a size such as 512M or 4G")
    number, unit = _number(match.group(1)), match.group(2).upper() or "M"
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[unit]
    value = max(1, int(number * scale))
    if value > MAX_MEGABYTES:
        raise BadInput(f"{option} {text!r}: more than 1 PiB")
    return value


def seconds(value: float | str, option: str, *, maximum: float = 86400.0 * 365) -> float:
    """A number of seconds more than 0 and at most ``maximum``: never NaN or infinite,
    which would make a loop spin or a lease never expire."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{option} {value!r}: not a number of seconds") from None
    if math.isnan(number) or not 0 < number <= maximum:
        raise BadInput(
            f"{option} {value!r}: give a number of seconds more than 0"
            + (f" and at most {maximum:.0f}" if math.isfinite(maximum) else "")
        )
    return number
