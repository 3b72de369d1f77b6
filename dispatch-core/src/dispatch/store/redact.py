"""Credentials out of every message (S-51).

A record store URL may carry a password in three places (``user:password@host``, a
``?password=`` query parameter, a libpq ``password=`` keyword), and a driver may quote the
whole URL back in its own error. ``redact_text`` masks all three forms wherever they occur
in a text, and also any literal password taken from the URL itself, so a message built
from a driver's words is safe to print, log or put in ``--json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"

#: A maximal run of characters that may form ``user:secret`` (found once each: linear).
_RUN = re.compile(r"[^\s/@'\"]+")
#: ``password=`` as a query parameter or a libpq keyword; its value is read by hand.
_KEYWORD = re.compile(r"\bpassword\s*=\s*", re.IGNORECASE)
#: An unquoted value: up to a space, ``&``, ``;`` or a quote.
_BARE = re.compile(r"[^\s&;'\"]+")


def _userinfo(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the secrets of every ``user:secret@`` in ``text`` (possibly empty).

    The user part holds no ``:``, and neither part holds a space, a quote, ``/`` or ``@``:
    so each candidate is one run of other characters directly followed by ``@``, and
    finding them is one pass (a backtracking pattern took quadratic time on a long text
    with no ``@``, such as a 100,000-character job id in an error message).
    """
    for run in _RUN.finditer(text):
        end = run.end()
        if end >= len(text) or text[end] != "@":
            continue
        start = run.start()
        while start < end and text[start] == ":":
            start += 1  # the user part is not empty: it starts after any leading colons
        colon = text.find(":", start, end)
        if colon > start:
            yield colon + 1, end


def _keyword(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the values of every ``password=value`` in ``text``, one pass.

    A quoted value runs to its closing quote (a backslash escapes the next character), or
    to the end of the text when the quote is never closed: more is masked, never less.
    """
    pos = 0
    while True:
        found = _KEYWORD.search(text, pos)
        if found is None:
            return
        start = found.end()
        if start < len(text) and text[start] in "'\"":
            quote, end = text[start], start + 1
            while end < len(text) and text[end] != quote:
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, len(text))
        else:
            bare = _BARE.match(text, start)
            end = bare.end() if bare else start
        if end > start:
            yield start, end
        pos = max(end, found.end(), found.start() + 1)


def _unquoted(value: str) -> str:
    return value[1:-1] if value[:1] in "'\"" and value[-1:] == value[:1] else value.lstrip("'\"")


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
    found |= {url[a:b] for a, b in _userinfo(url) if b > a}
    found |= {_unquoted(url[a:b]) for a, b in _keyword(url)}
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
    Linear in the length of ``text`` (times the number of ``secrets``).
    """
    masked = {text[a:b] for a, b in _userinfo(text)}
    masked |= {text[a:b].strip("'\"") for a, b in _keyword(text)}
    for secret in secrets:
        if secret and secret not in masked:
            text = text.replace(secret, MASK)
    spans = sorted({*((a, b) for a, b in _userinfo(text) if b > a), *_keyword(text)})
    out: list[str] = []
    done = 0
    for a, b in spans:
        if a < done:  # overlaps the span just masked: mask the union
            done = max(done, b)
            continue
        out += [text[done:a], MASK]
        done = b
    out.append(text[done:])
    return "".join(out)


#: A query key or option name that names a credential.
_SECRET_NAME = re.compile(r"pass|secret|token|key|sig|auth|cred|session|cookie", re.IGNORECASE)
#: An HTTP header as a command line gives it (``Name: value``, curl's ``-H``).
_HEADER = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_-]*:)(?P<value>\s*\S.*)", re.DOTALL)
_HEADER_FLAGS = ("-H", "--header")


def redact_url(url: str, every_value: bool = True) -> str:
    """``url`` as it may be shown: its password masked (:func:`redact_text`), and the value
    of every query parameter and the fragment masked too (a webhook's ``?token=``,
    ``&sig=``); with ``every_value`` False only the values of parameters named like a
    credential (``password``, ``token``, ``key``, ``secret``, ``sig``, ``auth``...), for a
    record store URL whose ``sslmode=`` people need to see."""
    text = redact_text(url, secrets_in(url))
    text, hashed, fragment = text.partition("#")
    head, asked, query = text.partition("?")
    if asked:
        pieces = re.split(r"([&;])", query)
        for i in range(0, len(pieces), 2):
            key, eq, value = pieces[i].partition("=")
            if not value and not eq:
                # a bare word: a token on its own unless it is plainly a flag name
                secret = every_value or bool(_SECRET_NAME.search(key))
                pieces[i] = MASK if key and secret else key
            elif value and (every_value or _SECRET_NAME.search(key)):
                pieces[i] = f"{key}={MASK}"
        head += "?" + "".join(pieces)
    if hashed:
        head += "#" + (MASK if fragment and every_value else fragment)
    return head


def redact_words(words: Iterable[str]) -> list[str]:
    """A command line as it may be shown: header values (``-H 'Authorization: Bearer x'``,
    ``--header=...``) masked, URLs as :func:`redact_url` shows them, and the value of a
    ``--token=x`` / ``API_KEY=x`` word whose name says it is a credential."""
    shown: list[str] = []
    header_next = False
    for word in words:
        if header_next or (word.startswith(("--header=", "-H")) and word not in _HEADER_FLAGS):
            flag = ""
            if not header_next:
                flag = "--header=" if word.startswith("--header=") else "-H"
                word = word[len(flag) :]
            found = _HEADER.match(word)
            word = f"{flag}{found['name']} {MASK}" if found else f"{flag}{MASK}"
        elif "://" in word:
            word = redact_url(word)
        else:
            name, eq, value = word.partition("=")
            if eq and value and _SECRET_NAME.search(name):
                word = f"{name}={MASK}"
        header_next = word in _HEADER_FLAGS
        shown.append(word)
    return shown
