"""The ``sh`` fixture of the CLI tests (cli_shell.py)."""

from cli.cli_shell import sh

__all__ = ["sh"]
