"""``dispatch``: submit, watch and recover training jobs.

The commands live in modules by group (``backends``, ``submit``, ``reading``,
``interventions``, ``supervise``, ``settings``); each is a thin shell over
:class:`dispatch.Client`. Only click is imported at start-up: each command imports the
core when it runs, so ``dispatch --help`` never pays for pydantic or a backend's library.
"""

from __future__ import annotations

import click

from dispatch.cli import backends, interventions, reading, settings, submit, supervise, ui
from dispatch.cli.common import Context, Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help="Record store: sqlite:///path.db or postgresql://... "
    "[default: env DISPATCH_STORE, the profile's, else $XDG_STATE_HOME/dispatch/record.db]",
)
@click.option(
    "--profile",
    metavar="NAME",
    help="Configuration profile [default: env DISPATCH_PROFILE, else 'default']; "
    "see `dispatch config`.",
)
@click.version_option(package_name="dispatch-core")
@click.pass_context
def cli(ctx: click.Context, store_url: str | None, profile: str | None) -> None:
    """Submit training jobs, see why each stopped, recover them by rules on causes."""
    if isinstance(ctx.obj, Context):  # given by the caller (tests, an embedding program)
        ctx.obj.store_url = store_url or ctx.obj.store_url
        ctx.obj.profile = profile or ctx.obj.profile
    else:
        ctx.obj = Context(store_url, profile)
    ctx.call_on_close(ctx.obj.close)


for command in (
    backends.backends,
    backends.plan,
    submit.submit,
    reading.status,
    reading.list_jobs,
    reading.history,
    reading.watch,
    reading.logs,
    interventions.cancel,
    interventions.resubmit,
    interventions.give_up,
    interventions.supersede,
    supervise.supervise,
    settings.config,
    ui.ui,
    ui.metrics,
):
    cli.add_command(command)


def main() -> None:
    cli()
