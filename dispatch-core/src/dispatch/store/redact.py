"""Credentials out of every message (S-51, issue 15.7).

A record store URL may carry a password in three places (``user:password@host``, a
``?password=`` query parameter, a libpq ``password=`` keyword), and a driver may quote the
whole URL back in its own error. ``redact_text`` masks all three forms wherever they occur
in a text, and also any literal password taken from the URL itself, so a message built
from a driver's words is safe to print, log or put in ``--json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"

#: ``user:secret@`` after an optional scheme; the user part may not hold ``/``, ``@``, ``:``.
_USERINFO = re.compile(
    r"(?P<head>(?:[A-Za-z][A-Za-z0-9+.\-]*://)?[^\s:/@'\"]+):(?P<pw>[^\s@/'\"]*)@"
)
#: ``password=secret`` as a query parameter or a libpq keyword (quoted or not).
_KEYWORD = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;'\"]+)",
    re.IGNORECASE,
)


def secrets_in(url: str) -> list[str]:
    """The passwords ``url`` carries, raw and percent-decoded, longest first."""
    found: set[str] = set()
    # The userinfo as a person wrote it: up to the last ``@`` (a password may hold an
    # unencoded ``@``, ``/`` or space that no URL parser accepts).
    rest = url.split("://", 1)[-1]
    if "@" in rest:
        userinfo = rest[: rest.rfind("@")]
        if ":" in userinfo:
            found.add(userinfo.split(":", 1)[1])
    for match in _USERINFO.finditer(url):
        if match.group("pw"):
            found.add(match.group("pw"))
    for match in _KEYWORD.finditer(url):
        value = match.group("pw")
        if value[:1] in "'\"":
            value = value[1:-1]
        if value:
            found.add(value)
    try:
        parts = urlsplit(url)
        if parts.password:
            found.add(parts.password)
        for key, value in parse_qsl(parts.query, keep_blank_values=False):
            if key.lower() == "password" and value:
                found.add(value)
    except ValueError:
        pass
    found |= {unquote(value) for value in found}
    return sorted((s for s in found if len(s) >= 2), key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every password form masked, and each of ``secrets`` too.

    A secret the patterns already mask where it stands is not replaced elsewhere: a
    password equal to the user or database name would otherwise mask those as well. One
    the patterns miss (a driver quoting an unparsable URL) is replaced wherever it occurs.
    """
    masked = {m.group("pw") for m in _USERINFO.finditer(text)}
    masked |= {m.group("pw").strip("'\"") for m in _KEYWORD.finditer(text)}
    for secret in secrets:
        if secret and secret not in masked:
            text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@" if m.group("pw") else m[0], text)
    return _KEYWORD.sub(lambda m: f"{m.group('head')}{MASK}", text)
