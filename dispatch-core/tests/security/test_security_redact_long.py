"""Redaction of long text stays correct and linear (S-51).

Every message the CLI prints is redacted; a 100,000-character job id in an error once
took the old backtracking patterns over 20 s. The bound is checked as CPU time in a child
process under ``RLIMIT_CPU``: 2,000,000 characters of each shape that made the old
patterns backtrack take well under a second linearly, and hours quadratically, so the
generous limit does not depend on the machine's load. (benchmarks/redact_long_text.py
prints the figures.)
"""

from __future__ import annotations

import subprocess
import sys

from dispatch.store import redact, redact_text
from dispatch.store.redact import redact_url, redact_words

SECRET = "hunter2x"

CHILD = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
from dispatch.store import redact_text
from dispatch.cli.render import escaped
n = 2_000_000
shapes = [
    "unknown job " + "x" * n,
    ("a:" * n)[:n] + "/",
    ("password='" * n)[:n],
    ("password=\"\\" * n)[:n],
    (":" * n) + "/@",
    ("u:p" + " " * 3) * (n // 6),
    ("\x1b[2J\r\n\u202e" * n)[:n],
]
for text in shapes:
    redact_text(text, ["hunter2x"])
    escaped(text)
print("ok")
"""


def test_redaction_of_two_million_characters_is_linear_S51() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_password_at_the_end_of_a_long_text_is_still_masked_S51() -> None:
    filler = "x" * 100_000
    assert SECRET not in redact_text(f"{filler} postgresql://u:{SECRET}@h/d")
    assert SECRET not in redact_text(f"{filler} host=h password={SECRET}")
    assert SECRET not in redact_text(f"{filler}:{filler} u:{SECRET}@h")
    assert SECRET not in redact_text(f"{filler} {SECRET} {filler}", [SECRET])


def test_each_form_is_masked_where_it_stands_S51() -> None:
    assert redact_text(f"u:{SECRET}@h and v:{SECRET}2@k") == "u:***@h and v:***@k"
    assert redact_text(f"::u:{SECRET}@h") == "::u:***@h"
    assert redact_text("u:@h") == "u:@h"  # no password: nothing to mask
    assert redact_text("at 12:30@b") == "at 12:***@b"  # masks more, never less
    assert redact_text(f"password = '{SECRET} x' next") == "password = *** next"
    assert redact_text(f"password='a\\'{SECRET}' x") == "password=*** x"
    # a quote never closed: masked to the end rather than shown
    assert redact_text(f"password='{SECRET} and the rest") == "password=***"
    assert redact_text(f"PASSWORD={SECRET}&sslmode=require") == "PASSWORD=***&sslmode=require"
    assert redact_text(f"password={SECRET}:x@host") == "password=***"
    assert redact(f"postgresql://u:{SECRET}@h/d?password={SECRET}") == (
        "postgresql://u:***@h/d?password=***"
    )


def test_redact_url_masks_query_values_fragment_and_password_S51() -> None:
    url = f"https://u:{SECRET}@hooks.example/p?token={SECRET}&sig=abc;flag#{SECRET}"
    assert redact_url(url) == "https://u:***@hooks.example/p?token=***&sig=***;***#***"
    assert redact_url(url, every_value=False) == (
        f"https://u:***@hooks.example/p?token=***&sig=***;flag#{SECRET}"
    )
    kept = "postgresql://u@h/d?sslmode=require&sslpassword=zz&application_name=x"
    assert redact_url(kept, every_value=False) == (
        "postgresql://u@h/d?sslmode=require&sslpassword=***&application_name=x"
    )
    assert redact_url("https://hooks.example/plain") == "https://hooks.example/plain"


def test_redact_words_masks_headers_and_credential_words_S51() -> None:
    words = [
        "curl",
        "-H",
        f"Authorization: Bearer {SECRET}",
        f"--header=X-Api-Key: {SECRET}",
        f"-HX-Token:{SECRET}",
        f"--token={SECRET}",
        f"API_KEY={SECRET}",
        f"https://h/x?code={SECRET}",
        "--data",
        "event=done",
    ]
    shown = redact_words(words)
    assert SECRET not in " ".join(shown)
    assert shown == [
        "curl",
        "-H",
        "Authorization: ***",
        "--header=X-Api-Key: ***",
        "-HX-Token: ***",
        "--token=***",
        "API_KEY=***",
        "https://h/x?code=***",
        "--data",
        "event=done",
    ]
