"""The ``sh`` fixture: the installed ``dispatch`` run as a user runs it (cli_shell.py)."""

from cli.cli_shell import sh

__all__ = ["sh"]
