"""The logs capability (S-46)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from dispatch import LogSelection

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.suite.support import not_provokable
from dispatch_testing.kit.view import Kit


def check_logs(kit: Kit, job: str, new_job: Callable[[], str]) -> None:
    """S-46: what each submission printed, that submission's only; resumable."""
    words = {n: f"kit-logs-{uuid.uuid4().hex[:8]}-submission-{n}" for n in (1, 2)}
    try:  # a tier whose nodes run no programs (KWOK) cannot make a job print
        specs = {n: kit.harness.printing_spec(w) for n, w in words.items()}
    except NotProvokable as exc:
        not_provokable(kit, exc)
    ids = {n: kit.backend.submit(job, n, specs[n], False) for n in words}
    kit.wait_for(
        job,
        lambda objs: {o.submission for o in objs if not o.alive} >= {1, 2},
        "both submissions ended",
    )
    for n, word in words.items():
        chunks = list(kit.backend.logs(ids[n], LogSelection().of(job, n)))
        assert all(isinstance(c, bytes) for c in chunks), "dispatch_logs yields bytes"
        text = b"".join(chunks)
        assert word.encode() in text, f"submission {n} printed {word!r}; its logs: {text!r}"
        other = words[3 - n].encode()
        assert other not in text, f"the logs of submission {n} hold submission {3 - n}'s"
        at = text.index(word.encode())
        rest = b"".join(kit.backend.logs(ids[n], LogSelection().of(job, n, at)))
        assert rest == text[at:], f"logs from offset {at} are not the rest: {rest!r}"
