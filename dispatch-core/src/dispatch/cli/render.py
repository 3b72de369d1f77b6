"""How statuses, histories and plans read, for people and (``--json``) for scripts.

Text a user or a scheduler wrote (job names, commands, the scheduler's words, node names,
actor names, error messages quoting them) reaches the terminal only through
:func:`escaped`: a control character, a line break inside a field or a bidi override is
shown as a visible escape, so a job name cannot clear the screen, set the terminal's
title, colour what follows or forge a line of ``list``. ``--json`` needs no such step:
``json.dumps`` escapes every control character and every non-ASCII character.
"""

from __future__ import annotations

import json
from typing import Any

import click

from dispatch.core.cause import Cause
from dispatch.core.policy import Plan
from dispatch.core.status import Status
from dispatch.model.events import Identity
from dispatch.model.supervision import Supervision

#: Named escapes; every other character below is shown as ``\xNN`` or ``\uNNNN``.
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: C0 controls (ESC, CR, LF, BEL...), DEL and the C1 controls (0x9b is a one-byte CSI).
_CONTROLS = (*range(0x00, 0x20), *range(0x7F, 0xA0))
#: Bidi marks, embeddings, overrides and isolates (they reorder what follows them on the
#: line), the line and paragraph separators, and the byte-order mark.
_FORMATS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_SEPARATORS = (0x2028, 0x2029, 0xFEFF)
_ESCAPES = {c: _NAMED.get(chr(c), f"\\x{c:02x}") for c in _CONTROLS}
_ESCAPES.update({c: f"\\u{c:04x}" for c in (*_FORMATS, *_SEPARATORS)})
_ESCAPES_KEEPING_LINES = {c: e for c, e in _ESCAPES.items() if chr(c) not in "\n\t"}


def escaped(text: object, lines: bool = False) -> str:
    """``text`` as it may reach a terminal: every control character, bidi override and
    line separator shown as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``). With
    ``lines``, line feeds and tabs are kept (a script shown whole, a message of several
    lines). Idempotent, and linear in the length of ``text``.
    """
    shown = str(text)
    if shown.isprintable():  # every character escaped here is a non-printable one
        return shown
    return shown.translate(_ESCAPES_KEEPING_LINES if lines else _ESCAPES)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def cause_line(cause: Cause | None) -> str:
    if cause is None:
        return "-"
    parts = [f"{cause.kind.value} ({cause.provenance.value}"]
    if cause.actor:
        parts[0] += f" {escaped(cause.actor)}"
    parts[0] += ")"
    if cause.exit_code is not None:
        parts.append(f"exit {cause.exit_code}")
    if cause.detail:
        parts.append(escaped(cause.detail))
    return ", ".join(parts)


def watch_line(watch: Supervision) -> str:
    """Whether a supervisor watches a job, as ``status``, ``list`` and ``watch`` say it:
    its words, loudly (``WARNING:``) when nothing will recover the job."""
    return watch.message if watch.watched else f"WARNING: {watch.message}"


def status_text(status: Status) -> str:
    lines = [
        f"job       {status.job_id}" + (f"  ({status.name})" if status.name else ""),
        f"backend   {status.backend or '-'}",
        *([f"submitter {status.submitter.describe()}"] if status.submitter else []),
        f"state     {status.state.value}"
        + ("" if status.settled else "  (not yet committed)")
        + ("" if status.level.value == "record" else f"  [{status.level.value}: no record]"),
        f"cause     {cause_line(status.cause)}",
    ]
    away = status.unreachable
    if away is not None:
        lines.append(
            f"scheduler UNREACHABLE since {away.since:%Y-%m-%d %H:%M:%S %Z} ({away.source}): "
            f"{away.words}; shown: the record alone"
        )
    if status.supervisor is not None:
        lines.append(f"watch     {watch_line(status.supervisor)}")
    if status.budgets:
        lines.append("budgets   " + ", ".join(f"{k}: {v} left" for k, v in status.budgets.items()))
    keeps_off = getattr(status, "exclude_nodes", ())
    if keeps_off:
        lines.append("keeps off " + ", ".join(keeps_off))
    if status.supersedes:
        lines.append(f"supersedes {status.supersedes}")
    if status.superseded_by:
        lines.append(f"superseded by {', '.join(status.superseded_by)}")
    if status.submissions:
        lines.append("submissions")
        for sub in status.submissions:
            objects = sub.objects
            if not objects:
                shown = sub.object_id or "(not created yet)"
                extra = f"  refused: {cause_line(sub.failed)}" if sub.failed else ""
                lines.append(f"  #{sub.number}  {shown}{extra}{_keeps_off(sub)}")
            for obj in objects:
                lines.append(
                    f"  #{sub.number}  {obj.object_id}  {obj.phase.value} ({obj.scheduler_state})"
                    + (f"  {cause_line(obj.cause)}" if obj.cause else "")
                    + _keeps_off(sub)
                )
    if status.escalations:
        lines.append("escalations")
        lines.extend(f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.reason}" for e in status.escalations)
    return "\n".join(escaped(line) for line in lines)


def _keeps_off(sub: object) -> str:
    nodes = getattr(sub, "exclude_nodes", ())
    return f"  keeps off {', '.join(sorted(nodes))}" if nodes else ""


def _by(actor: str | None, by: Identity | None) -> str:
    """``  by alice (uid 1001)``: the name the actor gave, and who the process really was."""
    if by is None:
        return f"  by {actor}" if actor else ""
    return f"  by {actor or 'someone'} ({by.describe()})"


def history_text(status: Status) -> str:
    if not status.history:
        return f"job {status.job_id}: no committed transitions yet (state {status.state.value})"
    rows = []
    for step in status.history:
        state = step.state.value if step.state else ""
        rows.append(
            f"{step.at:%Y-%m-%d %H:%M:%S}  #{step.seq:<3} {step.event:<18} {state:<10} "
            f"{cause_line(step.cause) if step.cause else ''}"
            + (f"  [{step.note}]" if step.note else "")
            + _by(step.actor, step.by)
        )
    return "\n".join(escaped(row) for row in rows)


def plan_text(plan: Plan) -> str:
    lines = [f"backend {plan.declarations.name}"]
    if not plan.bindings:
        lines.append("rules: none")
    for b in plan.bindings:
        mark = "" if b.enforced else "   <- NOT ENFORCED: this cause will fail the job"
        lines.append(
            f"  rule {b.index + 1}: {b.rule.describe()} -> enforced by {b.enforcer.value}{mark}"
        )
    if plan.policy.resubmit_on_stall is not None:
        lines.append(f"  {plan.policy.describe_stall()} -> enforced by supervisor")
    uncovered = sorted(k.value for k in plan.uncovered)
    lines.append("uncovered causes (will fail the job): " + (", ".join(uncovered) or "none"))
    impossible = sorted(k.value for k in plan.impossible)
    if impossible:
        lines.append(f"not reported by {plan.declarations.name}: " + ", ".join(impossible))
    return "\n".join(escaped(line) for line in lines)


def plan_json(plan: Plan) -> dict[str, Any]:
    return {
        "backend": plan.declarations.name,
        "rules": [
            {
                "rule": b.index + 1,
                **b.rule.model_dump(mode="json"),
                "enforcer": b.enforcer.value,
                "enforced": b.enforced,
            }
            for b in plan.bindings
        ],
        "uncovered": sorted(k.value for k in plan.uncovered),
        "unenforced": [b.index + 1 for b in plan.unenforced],
        "not_reported": sorted(k.value for k in plan.impossible),
    }
