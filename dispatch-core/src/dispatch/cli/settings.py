"""``dispatch config``: the effective settings of a profile and where each came from."""

from __future__ import annotations

import click

from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx


@click.command(name="config")
@json_option
@pass_ctx
@handles_errors
def config(c: Context, as_json: bool) -> None:
    """Show the effective configuration: each value and its source (command line,
    environment, project file dispatch.toml, user file, built-in default)."""
    from dispatch.cli.render import emit_json, escaped

    cfg = c.config

    if as_json:
        emit_json(
            {
                "profile": cfg.profile,
                "project_file": str(cfg.project_file) if cfg.project_file else None,
                "user_file": str(cfg.user_file) if cfg.user_file else None,
                "settings": {
                    s.key: {"value": shown(s.key, s.value), "source": s.source} for s in cfg.rows()
                },
            }
        )
        return
    click.echo(escaped(f"profile       {cfg.profile}"))
    click.echo(escaped(f"project file  {cfg.project_file or '(none found upward from here)'}"))
    click.echo(escaped(f"user file     {cfg.user_file or '(none)'}"))
    width = max(len(s.key) for s in cfg.rows())
    for s in cfg.rows():
        click.echo(escaped(f"{s.key:<{width}}  {shown(s.key, s.value)!s:<30}  {s.source}"))


def shown(key: str, value: object) -> object:
    """A setting as ``dispatch config`` shows it: no secret of a URL (a password, a
    notification URL's query values such as ``?token=``), of a notification command's
    headers or of its ``--token=`` words; as the record store's password is masked."""
    from dispatch.store.redact import redact_url, redact_words

    if key == "notify.url" and isinstance(value, str):
        return redact_url(value)
    if key == "notify.command" and isinstance(value, list):
        return redact_words(str(word) for word in value)
    if isinstance(value, str) and "://" in value:
        return redact_url(value, every_value=False)
    return value
