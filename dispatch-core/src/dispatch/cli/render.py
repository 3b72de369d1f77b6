"""How statuses, histories and plans read, for people and (``--json``) for scripts."""

from __future__ import annotations

import json
from typing import Any

import click

from dispatch.core.cause import Cause
from dispatch.core.policy import Plan
from dispatch.core.status import Status


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def cause_line(cause: Cause | None) -> str:
    if cause is None:
        return "-"
    parts = [f"{cause.kind.value} ({cause.provenance.value}"]
    if cause.actor:
        parts[0] += f" {cause.actor}"
    parts[0] += ")"
    if cause.exit_code is not None:
        parts.append(f"exit {cause.exit_code}")
    if cause.detail:
        parts.append(repr(cause.detail) if "\n" in cause.detail else cause.detail)
    return ", ".join(parts)


def status_text(status: Status) -> str:
    lines = [
        f"job       {status.job_id}" + (f"  ({status.name})" if status.name else ""),
        f"backend   {status.backend or '-'}",
        f"state     {status.state.value}"
        + ("" if status.settled else "  (not yet committed)")
        + ("" if status.level.value == "record" else f"  [{status.level.value}: no record]"),
        f"cause     {cause_line(status.cause)}",
    ]
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
    return "\n".join(lines)


def _keeps_off(sub: object) -> str:
    nodes = getattr(sub, "exclude_nodes", ())
    return f"  keeps off {', '.join(sorted(nodes))}" if nodes else ""


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
            + (f"  by {step.actor}" if step.actor else "")
        )
    return "\n".join(rows)


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
    return "\n".join(lines)


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
