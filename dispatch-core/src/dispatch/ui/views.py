"""The pages of ``dispatch ui``: the job list, a job's page, the summary, a log tail.

Each reads the record through the client (the list through :func:`dispatch.listing.
list_jobs`, bounded to the jobs shown; a job's page through ``store.read`` of that job
alone) and returns HTML built by :mod:`dispatch.ui.html`, so every value from the record
or a scheduler is escaped.

The three pages share their reading and their pieces (rows, the timeline, links), so they
stay in one module rather than three that import each other.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import quote

from dispatch.model.enums import CauseKind, State
from dispatch.ui.html import Markup, html, join

if TYPE_CHECKING:
    from dispatch.client import Client
    from dispatch.core.cause import Cause
    from dispatch.core.job import Job
    from dispatch.listing import Listed
    from dispatch.model.events import Event

#: Jobs per page of the list.
PAGE_SIZE = 50
#: Lines of each submission's output the log page shows.
LOG_TAIL = 200
#: One colour per cause kind (the timeline and the legend); running: no ending yet.
COLOURS: dict[str, str] = {
    "none": "#2e9e4f",
    "preempted": "#e39b1b",
    "node-lost": "#b4451f",
    "out-of-memory": "#8e3ccb",
    "time-limit": "#c7c11a",
    "non-zero-exit": "#d62b2b",
    "launch-failed": "#7a1f1f",
    "no-capacity": "#5c7db8",
    "cancelled": "#777777",
    "unknown": "#444444",
    "running": "#3c8dde",
}


class NotFound(Exception):
    """The page names something the record does not hold."""


class BadQuery(Exception):
    """A filter or page number the list cannot take."""


def colour(kind: str | None) -> str:
    return COLOURS.get(kind or "running", COLOURS["unknown"])


def age(then: datetime, now: datetime) -> str:
    seconds = max(int((now - then).total_seconds()), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def stamp(at: datetime | None) -> str:
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M:%S")


def layout(title: str, body: Markup, *, refresh: bool = False) -> Markup:
    """The page around ``body``: the stylesheet, the navigation and (for pages that show
    live jobs) the script that refreshes the ``[data-refresh]`` parts in place."""
    script = Markup('<script src="/static/ui.js" defer></script>') if refresh else Markup("")
    return html(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>{} · dispatch</title>"
        '<link rel="stylesheet" href="/static/ui.css">{}</head><body>'
        '<nav><a href="/">jobs</a> <a href="/summary">summary</a>'
        ' <a href="/metrics">metrics</a></nav><main>{}</main></body></html>',
        title,
        script,
        body,
    )


# ------------------------------------------------------------------ the list
def _choice(query: Mapping[str, str], key: str, allowed: Sequence[str]) -> str | None:
    value = query.get(key) or None
    if value is not None and value not in allowed:
        raise BadQuery(f"{key} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def list_page(client: Client, query: Mapping[str, str], now: datetime) -> Markup:
    """Newest first, ``PAGE_SIZE`` a page; filters ``state``, ``cause``, ``backend``;
    ``page`` (1, 2, ...) and ``after`` (the last job of the page before, which the
    "older" link carries). The store is asked for the page's jobs (its query filters by
    recorded state, backend and cause); only ``page`` without ``after`` (a number typed
    by hand) with a live state or a cause reads the pages before it as well."""
    from dispatch.listing import STATE_CHOICES, list_jobs

    state = _choice(query, "state", STATE_CHOICES)
    cause = _choice(query, "cause", [k.value for k in CauseKind])
    backend = query.get("backend") or None
    try:
        page = int(query.get("page") or "1")
    except ValueError:
        raise BadQuery(f"page must be a whole number; got {query.get('page')!r}") from None
    if not 1 <= page <= 10_000:
        raise BadQuery(f"page must be between 1 and 10000; got {page}")
    after = query.get("after") or None
    if after is not None and "\x00" in after:
        raise BadQuery("after must be a job id")
    listing = list_jobs(
        client.store,
        client.registry,
        state=state,
        cause=cause,
        backend=backend,
        limit=PAGE_SIZE,
        now=now,
        offset=0 if after is not None else (page - 1) * PAGE_SIZE,
        before=after,
    )
    rows = listing.rows
    notes = join(
        html('<p class="note">{} could not be asked: {}; its jobs show as recorded</p>', b, why)
        for b, why in sorted(listing.unreachable.items())
    )
    body = html(
        "<h1>Jobs</h1>{}{}"
        '<table id="jobs" data-refresh="jobs"><thead><tr><th>job</th><th>name</th>'
        "<th>backend</th><th>scheduler id</th><th>state</th><th>cause</th>"
        "<th>attempt</th><th>budget left</th><th>nodes</th><th>age</th></tr></thead>"
        "<tbody>{}</tbody></table>{}",
        _filters(client, state, cause, backend),
        notes,
        join(_list_row(r, now) for r in rows)
        or Markup('<tr><td colspan="10">no job matches</td></tr>'),
        _pager(query, page, listing.more, rows[-1].job_id if rows else None),
    )
    return layout("jobs", body, refresh=True)


def _filters(client: Client, state: str | None, cause: str | None, backend: str | None) -> Markup:
    from dispatch.listing import STATE_CHOICES

    def select(name: str, values: Sequence[str], chosen: str | None) -> Markup:
        options = join(
            html('<option value="{}"{}>{}</option>', v, " selected" if v == chosen else "", v)
            for v in values
        )
        return html(
            '<label>{} <select name="{}"><option value="">any</option>{}</select></label> ',
            name,
            name,
            options,
        )

    try:
        backends = sorted(client.registry.names())
    except Exception:  # a broken plugin leaves the filter free text
        backends = []
    if backend is not None and backend not in backends:
        backends.append(backend)
    return html(
        '<form id="filters" method="get" action="/">{}{}{}'
        '<button type="submit">filter</button></form>',
        select("state", STATE_CHOICES, state),
        select("cause", [k.value for k in CauseKind], cause),
        select("backend", backends, backend),
    )


def _list_row(row: Listed, now: datetime) -> Markup:
    if row.quarantined is not None:
        return html(
            '<tr class="quarantined" data-job="{}"><td><a href="/jobs/{}">{}</a></td>'
            '<td>{}</td><td>{}</td><td></td><td>quarantined</td><td colspan="4" class="error">'
            "{}</td><td>{}</td></tr>",
            row.job_id,
            quote(row.job_id, safe=""),
            row.job_id,
            row.name,
            row.backend,
            row.quarantined,
            age(row.created_at, now),
        )
    attempts = "?" if row.attempts is None else str(row.attempts)
    cause = row.cause or ""
    return html(
        '<tr data-job="{}" data-state="{}" data-cause="{}"><td><a href="/jobs/{}">{}</a></td>'
        '<td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td title="{}">{}</td>'
        "<td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        row.job_id,
        row.state,
        cause,
        quote(row.job_id, safe=""),
        row.job_id,
        row.name,
        row.backend,
        row.object_id or "",
        row.state,
        "" if row.waiting is None else html(' <span class="waiting">({})</span>', row.waiting),
        row.cause_detail or "",
        cause,
        row.attempt,
        attempts,
        "" if row.budget_left is None else row.budget_left,
        "" if row.nodes is None else row.nodes,
        age(row.created_at, now),
    )


def _pager(query: Mapping[str, str], page: int, more: bool, last: str | None) -> Markup:
    """ "newer" (the page before, by number) and "older" (the page after this one's last
    job, so that the store reads that page alone however deep it is)."""
    from urllib.parse import urlencode

    def link(number: int, text: str, after: str | None = None) -> Markup:
        kept = {k: v for k, v in query.items() if k not in ("page", "after") and v}
        kept["page"] = str(number)
        if after is not None:
            kept["after"] = after
        return html('<a href="/?{}">{}</a>', urlencode(kept), text)

    parts = [link(page - 1, "newer") if page > 1 else Markup("")]
    parts.append(html("<span>page {}</span>", page))
    parts.append(link(page + 1, "older", last) if more else Markup(""))
    return html('<p class="pager">{}</p>', join(parts, " "))


# ------------------------------------------------------------------ one job
@dataclass
class Attempt:
    """One submission on the timeline: when it was asked for, how it ended and what the
    policy did about it."""

    number: int
    requested_at: datetime
    object_id: str | None = None
    ended_at: datetime | None = None
    cause: Cause | None = None
    rule: int | None = None
    rule_text: str | None = None
    action: str | None = None
    budget_left: int | None = None
    exclude_nodes: tuple[str, ...] = ()


@dataclass
class Mark:
    """A moment on the timeline that is not an execution: a hold, its release, an
    escalation (a stall notice is one), a stop or cancel asked for, the outcome."""

    at: datetime
    kind: str
    text: str
    cause: Cause | None = None


@dataclass
class Timeline:
    job: Job
    attempts: list[Attempt] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)


def timeline(events: Sequence[Event]) -> Timeline:
    """The attempts and marks of a job, from its events in order."""
    from dispatch.core.folding import fold
    from dispatch.model import events as ev

    job = fold(events[:1])
    line = Timeline(job)
    by_number: dict[int, Attempt] = {}

    def end(number: int | None, at: datetime, cause: Cause) -> Attempt | None:
        attempt = by_number.get(number) if number is not None else None
        if attempt is None and number is None and line.attempts:
            attempt = line.attempts[-1]
        if attempt is None or attempt.cause is not None:
            return None
        attempt.ended_at = cause.at or at
        attempt.cause = cause
        return attempt

    for e in events[1:]:
        job = fold([e], job)
        if isinstance(e, ev.SubmissionRequested):
            a = Attempt(e.submission, e.at, exclude_nodes=tuple(sorted(e.exclude_nodes)))
            by_number[a.number] = a
            line.attempts.append(a)
        elif isinstance(e, ev.SubmissionCreated) and e.submission in by_number:
            by_number[e.submission].object_id = e.object_id
        elif isinstance(e, ev.SubmissionFailed):
            end(e.submission, e.at, e.cause)
        elif isinstance(e, ev.RecoveryStarted):
            ended = end(e.submission, e.at, e.cause)
            if ended is not None:
                rule = job.plan.policy.rules[e.rule]
                ended.rule, ended.rule_text = e.rule + 1, rule.describe()
                ended.action = e.action.value
                ended.budget_left = job.budget_left(e.rule) if rule.budget is not None else None
        elif isinstance(e, ev.HoldPlaced):
            line.marks.append(Mark(e.at, "hold", "held for a person", e.cause))
            ended = end(e.submission, e.at, e.cause) if e.submission is not None else None
            if ended is not None:
                ended.action = "hold"
                if e.rule is not None:
                    ended.rule = e.rule + 1
                    ended.rule_text = job.plan.policy.rules[e.rule].describe()
        elif isinstance(e, ev.HoldResolved):
            line.marks.append(Mark(e.at, "released", f"hold resolved: {e.resolution.value}"))
        elif isinstance(e, ev.EscalationRaised):
            line.marks.append(Mark(e.at, "escalation", e.reason, e.cause))
        elif isinstance(e, ev.StopRequested):
            line.marks.append(Mark(e.at, "stop", f"stop asked of {e.object_id}", e.cause))
        elif isinstance(e, ev.CancelRequested):
            line.marks.append(Mark(e.at, "cancel", "cancel asked", e.cause))
        elif isinstance(e, ev.OutcomeCommitted):
            end(None, e.at, e.cause)
            line.marks.append(Mark(e.at, "outcome", e.state.value, e.cause))
    line.job = job
    return line


def job_page(client: Client, job_id: str, now: datetime) -> Markup:
    from dispatch.model.errors import DispatchError, UnknownJob

    try:
        line = timeline(client.store.read(job_id))
    except UnknownJob:
        raise NotFound(f"no job {job_id!r} in the record") from None
    except DispatchError as exc:  # a row that does not decode: named, as the CLI does
        return layout(job_id, html('<h1>{}</h1><p class="error">{}</p>', job_id, exc))
    job = line.job
    live = ""
    try:
        status = client.status(job_id, timeout=5)
        state = status.state.value
        if status.supervisor is not None and job.outcome is None:
            live = status.supervisor.message
        if status.unreachable is not None:
            live = f"{status.unreachable.backend} could not be asked: {status.unreachable.words}"
    except Exception as exc:  # the page still shows the record
        state = job.outcome.state.value if job.outcome else "unknown"
        live = f"status: {exc}"
    end = job.outcome.at if job.outcome is not None else now
    body = html(
        '<h1>{} <small>{}</small></h1><div data-refresh="job">'
        '<table class="facts"><tr><th>state</th><td id="state">{}</td></tr>'
        "<tr><th>backend</th><td>{}</td></tr><tr><th>command</th><td><code>{}</code></td></tr>"
        "<tr><th>nodes</th><td>{}</td></tr><tr><th>created</th><td>{}</td></tr>"
        "{}{}</table>"
        "<h2>Timeline</h2>{}{}<h2>Attempts</h2>{}{}</div>"
        "<h2>Act on it</h2>{}"
        '<p><a href="/jobs/{}/logs">log tail</a> (the last {} lines of each submission)</p>',
        job.name,
        job.job_id,
        state,
        job.backend,
        shlex.join(job.spec.command),
        job.spec.resources.nodes,
        stamp(job.created_at),
        html("<tr><th>watch</th><td>{}</td></tr>", live) if live else "",
        _checkpoint(job),
        svg(line, end),
        _legend(),
        _attempts_table(line),
        _marks_list(line),
        _commands(job, state),
        quote(job.job_id, safe=""),
        LOG_TAIL,
    )
    return layout(job.name, body, refresh=job.outcome is None)


def _checkpoint(job: Job) -> Markup:
    excluded = sorted(
        job.spec.exclude_nodes | {n for s in job.submissions for n in s.exclude_nodes}
    )
    rows = [html("<tr><th>excluded nodes</th><td>{}</td></tr>", ", ".join(excluded) or "none")]
    directory = job.spec.checkpoint_dir
    if directory is None:
        rows.append(Markup("<tr><th>checkpoint</th><td>none declared</td></tr>"))
    else:
        resumed = (
            f"yes: attempts 2 to {len(job.submissions)} started with this directory"
            if len(job.submissions) > 1
            else "no: one attempt so far"
        )
        rows.append(html("<tr><th>checkpoint dir</th><td><code>{}</code></td></tr>", directory))
        rows.append(html("<tr><th>resumed</th><td>{}</td></tr>", resumed))
    return join(rows)


def svg(line: Timeline, end: datetime) -> Markup:
    """The timeline: one bar per execution (its submission), coloured by the cause that
    ended it, and a tick per hold, escalation, stop and outcome; each with its words as a
    tooltip."""
    width, left, bar, gap = 900.0, 40.0, 22.0, 8.0
    start = line.job.created_at
    times = [end, *(a.ended_at for a in line.attempts if a.ended_at), *(m.at for m in line.marks)]
    finish = max(t for t in times if t is not None)
    span = max((finish - start).total_seconds(), 1.0)

    def x(at: datetime) -> float:
        return left + (width - left - 10) * max((at - start).total_seconds(), 0.0) / span

    parts: list[Markup] = []
    for i, a in enumerate(line.attempts):
        y = 10 + i * (bar + gap)
        x0, x1 = x(a.requested_at), x(a.ended_at or end)
        kind = a.cause.kind.value if a.cause is not None else None
        words = _attempt_words(a)
        parts.append(
            html(
                '<g class="execution" data-attempt="{}" data-cause="{}">'
                '<text x="4" y="{}">#{}</text>'
                '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>'
                "</g>",
                a.number,
                kind or "running",
                f"{y + bar * 0.7:.1f}",
                a.number,
                f"{x0:.1f}",
                f"{y:.1f}",
                f"{max(x1 - x0, 3.0):.1f}",
                f"{bar:.0f}",
                colour(kind),
                words,
            )
        )
    height = 10 + max(len(line.attempts), 1) * (bar + gap)
    for m in line.marks:
        mx = x(m.at)
        parts.append(
            html(
                '<g class="mark" data-mark="{}"><line x1="{}" x2="{}" y1="2" y2="{}" '
                'stroke="{}" stroke-width="2" stroke-dasharray="4 2"/>'
                '<text x="{}" y="{}" class="mark-label" text-anchor="{}">{}</text>'
                "<title>{}</title></g>",
                m.kind,
                f"{mx:.1f}",
                f"{mx:.1f}",
                f"{height:.0f}",
                "#000000" if m.kind == "outcome" else "#aa2299",
                f"{mx + 2:.1f}" if mx < width / 2 else f"{mx - 2:.1f}",
                f"{height + 12:.0f}",
                "start" if mx < width / 2 else "end",
                m.kind,
                f"{stamp(m.at)} {m.kind}: {m.text}"
                + (f" ({m.cause.kind.value}: {m.cause.detail})" if m.cause else ""),
            )
        )
    return html(
        '<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" '
        'viewBox="0 0 {} {}" role="img" aria-label="timeline">{}'
        '<text x="{}" y="{}" class="axis">{}</text><text x="{}" y="{}" class="axis" '
        'text-anchor="end">{}</text></svg>',
        f"{width:.0f}",
        f"{height + 34:.0f}",
        f"{width:.0f}",
        f"{height + 34:.0f}",
        join(parts),
        f"{left:.0f}",
        f"{height + 30:.0f}",
        stamp(start),
        f"{width - 10:.0f}",
        f"{height + 30:.0f}",
        stamp(finish),
    )


def _attempt_words(a: Attempt) -> str:
    if a.cause is None:
        return f"#{a.number} {a.object_id or 'not created yet'}: no ending yet"
    c = a.cause
    words = f"#{a.number} {a.object_id or ''}: {c.kind.value} ({c.provenance.value}) {c.detail}"
    if a.action is not None:
        words += f"; {a.action}"
    return words


def _legend() -> Markup:
    return html(
        '<p class="legend">{}</p>',
        join(
            html('<span class="swatch" data-colour="{}">{}</span>', k, k)
            for k in COLOURS
            if k not in ("held", "released", "requeued", "duplicate")
        ),
    )


def _attempts_table(line: Timeline) -> Markup:
    rows = []
    for a in line.attempts:
        c = a.cause
        rows.append(
            html(
                '<tr data-attempt="{}"><td>#{}</td><td>{}</td><td>{}</td><td>{}</td>'
                '<td class="cause" data-colour="{}">{}</td><td>{}</td>'
                '<td class="words"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>'
                "<td>{}</td><td>{}</td><td>{}</td></tr>",
                a.number,
                a.number,
                a.object_id or "",
                stamp(a.requested_at),
                stamp(a.ended_at),
                c.kind.value if c else "running",
                c.kind.value if c else "",
                c.provenance.value if c else "",
                c.detail if c else "",
                "" if c is None or c.exit_code is None else c.exit_code,
                ", ".join(c.nodes) if c else "",
                "" if a.rule is None else f"rule {a.rule}: {a.rule_text}",
                a.action or "",
                "" if a.budget_left is None else a.budget_left,
                ", ".join(a.exclude_nodes),
            )
        )
    return html(
        '<table id="attempts"><thead><tr><th>#</th><th>scheduler id</th><th>requested</th>'
        "<th>ended</th><th>cause</th><th>provenance</th><th>scheduler's words</th>"
        "<th>exit</th><th>nodes</th><th>rule matched</th><th>action</th><th>budget left</th>"
        "<th>kept off</th></tr></thead><tbody>{}</tbody></table>",
        join(rows),
    )


def _marks_list(line: Timeline) -> Markup:
    if not line.marks:
        return Markup("")
    items = join(
        html(
            '<li data-mark="{}">{} <b>{}</b> {}{}</li>',
            m.kind,
            stamp(m.at),
            m.kind,
            m.text,
            "" if m.cause is None else f" ({m.cause.kind.value}: {m.cause.detail})",
        )
        for m in line.marks
    )
    return html('<h2>Holds, escalations, stops</h2><ul id="marks">{}</ul>', items)


def _commands(job: Job, state: str) -> Markup:
    jid = shlex.quote(job.job_id)
    lines = [f"dispatch status {jid}", f"dispatch history {jid}", f"dispatch logs {jid}"]
    if job.outcome is None:
        lines.append(f"dispatch watch {jid}")
        if job.hold is not None:
            lines += [f"dispatch resubmit {jid}", f"dispatch give-up {jid}"]
        lines.append(f"dispatch cancel {jid}")
    else:
        lines.append(f"dispatch supersede {jid}")
    return html('<pre id="commands">{}</pre>', "\n".join(lines))


def logs_page(client: Client, job_id: str) -> Markup:
    from dispatch.model.errors import DispatchError, UnknownJob

    try:
        handle = client.job(job_id)
    except UnknownJob:
        raise NotFound(f"no job {job_id!r} in the record") from None
    try:
        chunks = [
            html("<h2>submission {}</h2><pre>{}</pre>", c.submission, c.text)
            for c in handle.logs(tail=LOG_TAIL)
        ]
        body = join(chunks) or Markup("<p>no output yet</p>")
    except DispatchError as exc:
        body = html('<p class="error">{}</p>', exc)
    return layout(
        f"logs of {job_id}",
        html(
            '<h1>Log tail of <a href="/jobs/{}">{}</a></h1>{}', quote(job_id, safe=""), job_id, body
        ),
    )


# ------------------------------------------------------------------ summary
def summary_page(client: Client, now: datetime) -> Markup:
    """Jobs by state (recorded: active or their outcome), endings by cause over the last
    day and week, time lost to preemption, the nodes most often named in endings.

    The store counts the jobs by state (one query) and reads the events that begin and
    end attempts of the jobs with an ending in the last week (one query): the page's cost
    grows with the week's endings, not with the record."""
    from dispatch.store.base import ENDING_TYPES

    store = client.store
    by_state: Counter[str] = Counter()
    known = {s.value for s in State}
    for outcome, n in store.count_jobs().items():
        shown = "active" if outcome is None else outcome if outcome in known else "quarantined"
        by_state[shown] += n
    week_ago = now - timedelta(days=7)
    feed = store.ending_events(week_ago)
    per_job: dict[str, list[Event]] = {}
    for e in feed.events:
        if e.type in ENDING_TYPES:
            per_job.setdefault(e.job_id, []).append(e)
    day: Counter[str] = Counter()
    week: Counter[str] = Counter()
    nodes: Counter[str] = Counter()
    lost = timedelta(0)
    bad = [f"{q.job_id}: {q.message}" for q in feed.quarantined]
    for evs in per_job.values():
        for a in endings(evs):
            if a.cause is None or a.ended_at is None or a.ended_at < week_ago:
                continue
            week[a.cause.kind.value] += 1
            if now - a.ended_at <= timedelta(days=1):
                day[a.cause.kind.value] += 1
            nodes.update(a.cause.nodes)
            if a.cause.kind is CauseKind.PREEMPTED:
                # what fell in the week: an attempt requested before it counts from its start
                lost += a.ended_at - max(a.requested_at, week_ago)
    causes = sorted(set(week))
    body = html(
        '<h1>Summary</h1><div data-refresh="summary"><h2>Jobs by state</h2>'
        '<table id="by-state">{}</table><h2>Endings by cause</h2>'
        '<table id="by-cause"><tr><th>cause</th><th>last day</th><th>last week</th></tr>{}'
        '</table><h2>Time lost to preemption (last week)</h2><p id="lost">{}</p>'
        '<h2>Nodes most often named in endings (last week)</h2><table id="nodes">{}</table>'
        "{}</div>",
        join(
            html("<tr><th>{}</th><td>{}</td></tr>", k, v) for k, v in sorted(by_state.items()) if v
        ),
        join(
            html(
                '<tr><td data-colour="{}">{}</td><td>{}</td><td>{}</td></tr>', k, k, day[k], week[k]
            )
            for k in causes
        ),
        _duration(lost),
        join(html("<tr><td>{}</td><td>{}</td></tr>", n, c) for n, c in nodes.most_common(10)),
        ""
        if not bad
        else html(
            '<h2>Jobs the record cannot read</h2><ul class="error">{}</ul>',
            join(html("<li>{}</li>", b) for b in bad),
        ),
    )
    return layout("summary", body, refresh=True)


def endings(events: Sequence[Event]) -> list[Attempt]:
    """A job's attempts, when each was asked for and the cause that ended it, from its
    events that begin and end attempts alone (``RecordStore.ending_events``): the
    endings :func:`timeline` finds, without the rules it names."""
    from dispatch.model import events as ev

    attempts: list[Attempt] = []
    by_number: dict[int, Attempt] = {}
    for e in events:
        if isinstance(e, ev.SubmissionRequested):
            a = Attempt(e.submission, e.at)
            by_number[a.number] = a
            attempts.append(a)
            continue
        if isinstance(e, ev.HoldPlaced) and e.submission is None:
            continue  # a hold that ended no attempt
        if isinstance(e, ev.SubmissionFailed | ev.RecoveryStarted | ev.HoldPlaced):
            number = e.submission
        elif isinstance(e, ev.OutcomeCommitted):
            number = None
        else:
            continue
        attempt = by_number.get(number) if number is not None else None
        if number is None and attempts:
            attempt = attempts[-1]
        if attempt is not None and attempt.cause is None:
            attempt.ended_at = e.cause.at or e.at
            attempt.cause = e.cause
    return attempts


def _duration(d: timedelta) -> str:
    seconds = int(d.total_seconds())
    return f"{seconds // 3600}h {seconds % 3600 // 60}m {seconds % 60}s"


__all__ = [
    "PAGE_SIZE",
    "BadQuery",
    "NotFound",
    "job_page",
    "list_page",
    "logs_page",
    "summary_page",
]
