"""``dispatch backends`` and ``dispatch plan``: what is installed, and what a policy means."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx

if TYPE_CHECKING:
    from dispatch.backends import Backend


@click.command()
@json_option
@pass_ctx
@handles_errors
def backends(c: Context, as_json: bool) -> None:
    """List installed backends, their declarations, and broken plugins with their error."""
    from dispatch.cli.render import emit_json, escaped

    loaded, broken = c.registry.load_all()
    if as_json:
        emit_json({"backends": [_row(b) for _, b in sorted(loaded.items())], "broken": broken})
        return
    for _, backend in sorted(loaded.items()):
        click.echo(backend_text(backend))
    for name, error in sorted(broken.items()):
        click.echo(escaped(f"{name}  BROKEN: {error}"))


def _row(backend: Backend) -> dict[str, Any]:
    return {
        "name": backend.name,
        "distribution": backend.distribution,
        "version": backend.version,
        "declarations": backend.declarations.model_dump(mode="json"),
    }


def backend_text(backend: Backend) -> str:
    """One backend's declarations as people read them: each line from this backend's own
    declarations (never another's), escaped: a plugin's words are not dispatch's."""
    from dispatch.cli.render import escaped

    decl = backend.declarations
    d = decl.model_dump(mode="json")
    lines = [f"{backend.name}  ({backend.distribution or 'registered directly'} {backend.version})"]
    if decl.description:  # an adapter's warning (a scheduler version never tested) is here
        lines.append(f"  about             {decl.description}")
    lines.append(f"  node-loss window  {_seconds(decl.node_loss_window.total_seconds())}")
    if decl.pending_windows:
        windows = ", ".join(
            f"{k.value} {_seconds(v.total_seconds())}"
            for k, v in sorted(decl.pending_windows.items())
        )
        lines.append(f"  pending windows   {windows}")
    lines += [
        f"  native actions    {', '.join(sorted(d['native_actions'])) or 'none'}",
        f"  capabilities      {', '.join(sorted(d['capabilities'])) or 'none'}",
        f"  reports           {', '.join(sorted(d['reports']))}",
    ]
    if d["options"]:
        lines.append(f"  options           {', '.join(sorted(d['options']))}")
    return "\n".join(escaped(line) for line in lines)


def _seconds(total_seconds: float) -> str:
    total = int(total_seconds)
    for unit, size in (("h", 3600), ("min", 60)):
        if total >= size and total % size == 0:
            return f"{total // size} {unit}"
    return f"{total} s"


@click.command()
@click.option("--backend", help="Backend to bind the policy to [default: profile's, or local].")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(path_type=Path),
    help="Policy file (TOML) [default: the profile's].",
)
@json_option
@pass_ctx
@handles_errors
def plan(c: Context, backend: str | None, policy_file: Path | None, as_json: bool) -> None:
    """Validate a policy and show who enforces each rule and which causes stay uncovered."""
    from dispatch.cli.render import emit_json, plan_json, plan_text
    from dispatch.model.errors import BadInput

    if policy_file is None and c.client.defaults and c.client.defaults.value("policy") is None:
        raise BadInput("give --policy FILE (or set policy in a profile: see `dispatch config`)")
    bound = c.client.plan(backend, policy_file)
    if as_json:
        emit_json(plan_json(bound))
    else:
        click.echo(plan_text(bound))
