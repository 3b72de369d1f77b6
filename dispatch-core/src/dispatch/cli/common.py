"""What every command shares: the context, ``--json``, and the one error boundary.

Only click is imported here; each command imports the core when it runs, so
``dispatch --help`` never pays for pydantic or a backend's client library.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from dispatch.backends import Registry
    from dispatch.client import Client
    from dispatch.config import Config
    from dispatch.store.base import RecordStore

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print data as JSON.")


class Context:
    """Opened on first use: the configuration, the record store, the backends, the client.

    :param store_url: ``--store`` (None: from the configuration).
    :param profile: ``--profile`` (None: ``DISPATCH_PROFILE`` or ``default``).
    :param registry: the backends to use (None: the installed ones); tests pass their own.
    :param store: an open record store to use instead of ``store_url``'s (tests, embedding).
    """

    def __init__(
        self,
        store_url: str | None = None,
        profile: str | None = None,
        registry: Registry | None = None,
        store: RecordStore | None = None,
    ) -> None:
        self.store_url = store_url
        self.profile = profile
        self._registry = registry
        self._given_store = store
        self._config: Config | None = None
        self._client: Client | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from dispatch.config import load_config

            self._config = load_config(profile=self.profile, cli={"store": self.store_url})
        return self._config

    @property
    def client(self) -> Client:
        if self._client is None:
            from dispatch.client import Client

            store = self.config.value("store")
            self._client = Client(
                self._given_store if self._given_store is not None else store,
                registry=self._registry,
                defaults=self.config,
                notifier=self.config.notifier(store),
            )
        return self._client

    @property
    def store(self) -> RecordStore:
        return self.client.store

    @property
    def registry(self) -> Registry:
        return self.client.registry

    def close(self) -> None:
        """After the command: let notifications go out, close the store; a failure here
        is a warning, never a traceback (the command's work is done)."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:
                text = message_lines(_redacted(str(exc)))
                click.echo(f"dispatch: warning: closing the record store: {text}", err=True)


pass_ctx = click.make_pass_decorator(Context)


class UsageProblem(click.UsageError):
    """A usage error (an unknown option, a missing argument, a value out of range) shown
    as every other error is: one ``dispatch: ...`` line with advice, exit 2, and with
    ``--json`` the error object on stdout (docs/cli.md), of type ``UsageError`` whichever
    of click's classes it was."""

    def __init__(self, cause: click.UsageError, as_json: bool) -> None:
        super().__init__(cause.format_message(), ctx=cause.ctx)
        self.as_json = as_json

    def show(self, file: Any = None) -> None:
        from dispatch.cli.render import emit_json, escaped

        message = self.format_message().rstrip(".")
        text = message[:1].lower() + message[1:]
        if self.ctx is not None:
            text += f" (see `{self.ctx.command_path} --help`)"
        if self.as_json:
            emit_json(
                {"error": {"type": "UsageError", "message": text, "exit_code": self.exit_code}}
            )
        click.echo(f"dispatch: {escaped(text)}", err=True)


class Group(click.Group):
    """The ``dispatch`` group: its own and its commands' usage errors as :class:`UsageProblem`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["dispatch.args"] = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise UsageProblem(exc, _json_asked(args)) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with escaping_output():
                return super().invoke(ctx)
        except UsageProblem:
            raise
        except click.UsageError as exc:
            raise UsageProblem(exc, _json_asked(ctx.meta.get("dispatch.args", []))) from None


class _Escaping:
    """A text stream that shows every control character but line feeds and tabs as an
    escape (:func:`dispatch.cli.render.escaped`); the rest is the stream it wraps (its
    ``buffer`` too: ``logs`` writes a job's bytes there, unchanged)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        shown = text
        if not text.replace("\n", "").replace("\t", "").isprintable():
            # (plain text, such as --help, needs neither the rendering layer nor its imports)
            from dispatch.cli.render import escaped

            shown = escaped(text, lines=True)
        self._inner.write(shown)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def escaping_output() -> Iterator[None]:
    """While a command runs, what it prints as text passes through :class:`_Escaping`.

    The backstop behind the escaping of each field where it is printed: a print site that
    forgets it still cannot clear the screen, set the title or colour the terminal (a line
    break inside a field is escaped only where the field is printed).
    """
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(sys.stdout), _Escaping(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _json_asked(args: list[str]) -> bool:
    """Whether ``--json`` was among the options (before ``--``): the command line did not
    parse, so the flag is looked for in the words as given."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def _where(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return f"argument {(param.name or '').upper()}"


#: The longest a job id or a name may be: far above any real one (job ids are 13
#: characters), low enough that a value pasted by mistake is refused at once instead of
#: carried into every lookup and message. Other options check their values themselves.
LONGEST = {"job_id": 256, "name": 1024}


def check_arguments(kwargs: dict[str, Any]) -> None:
    """Refuse undecodable bytes in any text argument, naming the option (S-36), and a
    job id or name longer than its bound (``LONGEST``).

    Paths are exempt: a file may have any name, and it is only opened, never recorded.
    """
    from dispatch.inputs import check_text
    from dispatch.model.errors import BadInput

    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.command is None:
        return
    for param in ctx.command.params:
        if isinstance(param.type, click.Path) or param.name not in kwargs:
            continue
        value = kwargs[param.name]
        longest = LONGEST.get(param.name or "")
        if longest is not None and isinstance(value, str) and len(value) > longest:
            what = "a job id" if param.name == "job_id" else "a name"
            raise BadInput(
                f"{_where(param)}: {len(value):,} characters, more than the {longest:,} "
                f"{what} may have"
            )
        check_text(value, _where(param))


def fail(exc: BaseException, as_json: bool) -> None:
    """Print an error as advice (and as JSON with --json) and exit with its code."""
    from dispatch.cli import exit_codes

    code = exit_codes.for_error(exc)
    text = _redacted(exit_codes.message(exc))
    if as_json:
        from dispatch.cli.render import emit_json

        emit_json({"error": {"type": type(exc).__name__, "message": text, "exit_code": code}})
    if code == exit_codes.INTERNAL and os.environ.get("DISPATCH_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    click.echo(f"dispatch: {message_lines(text)}", err=True)
    sys.exit(code)


def message_lines(text: str) -> str:
    """An error message as printed after ``dispatch:``: escaped (it may quote a job name or
    a scheduler's words), its own line breaks kept, every further line indented so none
    can pass for a line of dispatch's own."""
    from dispatch.cli.render import escaped

    first, *rest = escaped(text, lines=True).split("\n")
    return "\n".join([first, *(line if line[:1].isspace() else f"  {line}" for line in rest)])


def _redacted(text: str) -> str:
    """No password in what is printed, whichever layer wrote the message (S-51)."""
    from dispatch.store import redact_text

    return redact_text(text)


def handles_errors(fn: F) -> F:
    """The one error boundary: every exception a user can meet becomes a message on
    stderr and the documented exit code (``exit_codes``), never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from dispatch.cli import exit_codes

        try:
            check_arguments(kwargs)
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("dispatch: interrupted", err=True)
            sys.exit(exit_codes.INTERRUPTED)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(exit_codes.BROKEN_PIPE)
        except Exception as exc:
            fail(exc, bool(kwargs.get("as_json")))

    return wrapper  # type: ignore[return-value]


def seconds_option(
    name: str, default: float, help: str, dest: str | None = None
) -> Callable[[F], F]:
    """A number of seconds checked by :func:`dispatch.units.seconds`: never NaN,
    infinite, zero or negative (a loop that spins, a lease that never ends)."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> float | None:
        if value is None:
            return None
        from dispatch.model.errors import BadInput
        from dispatch.units import seconds

        try:
            return seconds(value, name)
        except BadInput as exc:
            raise click.BadParameter(str(exc).removeprefix(f"{name} ")) from None

    return click.option(
        name,
        *([dest] if dest else []),
        type=str,
        default=str(default),
        show_default=True,
        callback=check,
        help=help,
    )
