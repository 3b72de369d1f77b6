"""The adapter contract: every hook a backend implements, stated once, here (S-30).

A backend is one plugin object registered under the entry-point group
``dispatch.backends`` (:mod:`dispatch.plugin` is the one-page tutorial). dispatch gives
every backend its own plugin manager, so a hook call reaches exactly the backend the user
named; an implementation never checks "is this call for me?". Every hook is
``firstresult``: the backend's answer is the call's value.

Everything else is derived from this module: :data:`dispatch.backends.DOCUMENTED` (the
exceptions that pass through the error boundary) from each hook's ``:raises X:`` lines,
which hooks a backend must implement from each hook's ``needed``, and the hook table of
``docs/adapters.md`` from :func:`contract_table` (a test keeps the page in step).

Errors every hook may raise:

- :class:`dispatch.Unreachable` when the scheduler cannot be reached (timeouts, refused
  connections, a controller that is down), for each hook that says so. Never return a
  state for it (S-5).
- any other exception (and any exception a hook does not document) is a bug in the
  backend, reported with the backend's name and the hook (``BackendFailed``).

Versions and deprecation. :data:`API_VERSION` is this contract's version; a backend says
which one it was written against in ``Declarations.api_version`` and is refused at load
when that is newer than this dispatch. A hook is deprecated, never removed at once: its
spec stays here with pluggy's ``warn_on_impl`` (a ``DeprecationWarning`` naming its
replacement, shown when a backend implementing it is loaded), its ``needed`` becomes
``"deprecated"``, the core goes on calling it for a backend that lacks the replacement,
and the table says so; it is removed only in a later ``API_VERSION``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

if TYPE_CHECKING:
    from dispatch.core.cause import Cause
    from dispatch.model.declarations import Declarations
    from dispatch.model.discovery import Discovery
    from dispatch.model.prepared import Prepared
    from dispatch.model.selection import LogSelection
    from dispatch.model.spec import ArrayMember, JobSpec

PROJECT = "dispatch"
#: The contract's version. 1: ``dispatch_submit``, ``dispatch_render`` and a
#: seven-parameter ``dispatch_logs``; 2: ``dispatch_prepare``/``dispatch_send``, and
#: ``dispatch_logs(object_id, selection)``.
API_VERSION = 2

hookspec = pluggy.HookspecMarker(PROJECT)

F = TypeVar("F", bound=Callable[..., Any])

#: What ``needed`` says, in the words of the table.
NEEDED = {
    "always": "always",
    "submit": "always, unless dispatch_prepare and dispatch_send",
    "prepared": "dispatch_prepare and dispatch_send together, instead of dispatch_submit",
    "gating": "with the gating capability (and only then)",
    "logs": "with the logs capability (and only then)",
    "arrays": "with the arrays capability (and only then)",
    "optional": "optional",
    "deprecated": "deprecated",
}


def needed(when: str) -> Callable[[F], F]:
    """When a backend must implement the hook (a key of :data:`NEEDED`); a capability
    name means: exactly when the backend declares that capability."""
    if when not in NEEDED:
        raise ValueError(f"needed: {when!r} is not one of {', '.join(NEEDED)}")

    def mark(spec: F) -> F:
        spec.dispatch_needed = when  # type: ignore[attr-defined]
        return spec

    return mark


@needed("always")
@hookspec(firstresult=True)
def dispatch_declare() -> Declarations:  # type: ignore[empty-body]
    """Describe the backend: its name, node-loss window, pending windows, natively
    enforced actions, the cause kinds it can report, its capabilities and options, and
    the ``api_version`` of this contract it was written against.

    Called once when the backend is loaded and bound into every plan. Must not contact the
    scheduler: ``dispatch backends`` lists declarations on a machine with no cluster.

    :return: a :class:`dispatch.Declarations` whose ``name`` is the entry-point name.
    """


@needed("always")
@hookspec(firstresult=True)
def dispatch_discover(job_ids: Sequence[str]) -> Discovery:  # type: ignore[empty-body]
    """Show what the scheduler knows now about every object of these jobs, in one go.

    :param job_ids: dispatch job ids, at most ``Declarations.max_discovery_batch`` of them.
        The cost must not grow in scheduler calls with their number (S-32): one listing,
        filtered by the tags the submit put on the objects.
    :return: a :class:`dispatch.Discovery` stamped with the time it was taken. Ids the
        scheduler does not know are absent, not errors. Every object the scheduler still
        lists is present, ended ones included, with every execution it can tell about.
        An answer the adapter cannot map is an object with cause ``unknown`` and the
        answer verbatim in ``detail`` (S-4).
    :raises Unreachable: the scheduler could not be asked; never a partial answer.
    """


@needed("submit")
@hookspec(firstresult=True)
def dispatch_submit(  # type: ignore[empty-body]
    job_id: str, submission: int, spec: JobSpec, gated: bool
) -> str:
    """Create the scheduler object for submission ``submission`` of job ``job_id``, in
    one step. A backend implements this or the pair :func:`dispatch_prepare` and
    :func:`dispatch_send`, which dispatch prefers (the dry run then prints exactly what
    is sent); with this hook alone ``dispatch submit --dry-run`` prints the spec.

    :param spec: what to run and with which resources; ``spec.options`` holds only names
        the declarations list.
    :param gated: create the object so that it does not start until
        :func:`dispatch_open_gate` (S-28); only called with True on a backend that declares
        the ``gating`` capability.
    :return: the scheduler's object id. The object must be tagged so that
        :func:`dispatch_discover` finds it by job id and submission number even if this
        return value is lost (a crash right after submitting, S-34).
    :raises SubmitRefused: the scheduler refused it; ``detail`` holds its words verbatim.
        dispatch records a refusal as a failed submission with those words; any other
        error but ``Unreachable`` is a fault in the backend, recorded as a failed
        submission too (``BackendFailed`` naming the hook), never retried for ever. (An
        object the scheduler accepted and then failed to start is discovered as ended
        with ``launch-failed`` instead.)
    :raises Unreachable: the scheduler could not be asked; dispatch asks again later.

    The core never hands a backend a spec asking for a capability its declarations lack
    (nodes > 1 without ``multi-node``, GPUs, a time limit, ``exclude_nodes``, ``gated``):
    it refuses such a job before recording it. ``spec.script`` is the text of a script
    file, not a path: run it by its own ``#!`` line, never through ``sh``.
    ``spec.exclude_nodes`` (with the ``exclude-nodes`` capability) names nodes the object
    must keep off (S-43).
    """


@needed("prepared")
@hookspec(firstresult=True)
def dispatch_prepare(  # type: ignore[empty-body]
    job_id: str, submission: int, spec: JobSpec, gated: bool
) -> Prepared:
    """Build what submission ``submission`` of job ``job_id`` sends, sending nothing.

    The one place a backend turns a spec into what its scheduler receives (the sbatch
    argv, batch script and environment; the TrainJob and its runtime copy; the local
    runner's command and environment): :func:`dispatch_send` sends exactly the result and
    ``dispatch submit --dry-run`` prints it, so a dry run is what is sent. It may read
    the scheduler (a runtime's definition) but never changes anything there or on disk.

    :param spec: the spec as it will be sent (``native_actions`` set); the arguments
        mean what they mean for :func:`dispatch_submit`.
    :return: a :class:`dispatch.Prepared` for this backend, job and submission.
    :raises SubmitRefused: the spec cannot be sent as it is (words a user can act on);
        dispatch records it as a refused submission, and a dry run shows the words.
    :raises Unreachable: what the preparation reads could not be read now.
    """


@needed("prepared")
@hookspec(firstresult=True)
def dispatch_send(prepared: Prepared) -> str:  # type: ignore[empty-body]
    """Create the scheduler object from ``prepared``, exactly as it is.

    :param prepared: what :func:`dispatch_prepare` of this backend built, unchanged.
    :return: the scheduler's object id, tagged as :func:`dispatch_submit` says.
    :raises SubmitRefused: the scheduler refused it; ``detail`` holds its words verbatim.
    :raises Unreachable: the scheduler could not be asked; dispatch asks again later.
    """


@needed("gating")
@hookspec(firstresult=True)
def dispatch_open_gate(object_id: str) -> None:
    """Let a gated object start (Slurm ``scontrol release``, TrainJob ``suspend: false``).

    Called only after the discovery showed every older object of the job ended (S-28),
    and only for an object submitted gated, so only on a backend that declares the
    ``gating`` capability: a backend without it never receives this call (the kit
    checks it) and leaves the hook out; declaring ``gating`` without it is refused when
    the backend is loaded.

    :param object_id: the id the submit returned (or discovery showed).
    :return: None. Idempotent: opening an open gate, or the gate of an ended or unknown
        object, is not an error.
    :raises Unreachable: the scheduler could not be asked; dispatch asks again next tick.
    """


@needed("always")
@hookspec(firstresult=True)
def dispatch_stop(object_id: str, cause: Cause) -> None:
    """Stop an object and all its executions, within a bounded time.

    :param object_id: the object to stop.
    :param cause: why dispatch stops it (an actor's cancel, the node-loss fence, a
        duplicate, a spent native budget); adapters may pass ``cause.detail`` on to the
        scheduler as a comment.
    :return: None once the scheduler accepted the request; the object shows as ended in
        a later discovery. Idempotent (S-30): stopping a stopped, ended or unknown object
        is not an error. dispatch asks again while a stopped object still shows alive.
    :raises Unreachable: the scheduler could not be asked.
    """


@needed("arrays")
@hookspec(firstresult=True)
def dispatch_check_array(size: int, max_running: int | None) -> None:
    """Refuse a sweep the scheduler could not take as one array, before anything is
    recorded (only on a backend that declares the ``arrays`` capability).

    Called by ``dispatch submit --sweep`` and ``Client.sweep`` after the members' specs
    were validated. Unlike :func:`dispatch_validate` it may read the scheduler's
    configuration (Slurm's ``MaxArraySize``).

    :param size: how many members the sweep has (array tasks ``0`` to ``size - 1``).
    :param max_running: the sweep's bound on members running at once, or None.
    :return: None when the scheduler takes such an array.
    :raises BadInput: naming the scheduler's limit that the sweep exceeds.
    :raises Unreachable: the configuration could not be read; nothing is recorded.
    """


@needed("arrays")
@hookspec(firstresult=True)
def dispatch_submit_array(
    group_id: str, members: Sequence[ArrayMember], max_running: int | None
) -> Sequence[str] | None:
    """Create ONE scheduler object for the first submissions of several members of sweep
    ``group_id``, one task per member (only on a backend that declares ``arrays``).

    The supervisor calls it, within one tick, with every member of a group whose first
    submission it is about to make (never gated, always submission 1), instead of one
    submit per member; a member's later submissions go through the usual submit, one
    object each. An adapter without ``arrays`` keeps getting one submit per member. A
    backend that also implements :func:`dispatch_prepare_array` sends exactly the
    ``Prepared`` that hook builds for the same arguments (the sweep's dry run shows it).

    :param members: :class:`dispatch.ArrayMember` values in member order, at least two;
        ``index`` is the member's place in the sweep, ``spec`` its spec as
        :func:`dispatch_submit` would get it (the specs differ in command, name and
        environment only).
    :param max_running: at most this many tasks at once (Slurm ``--array=...%K``), or None.
    :return: one object id per member, in the order of ``members``, each the object
        discovery reports for that member's submission 1 (Slurm's ``123_4``); every task
        must be tagged so that :func:`dispatch_discover` finds it by the member's job id
        and submission 1 if this return value is lost (S-34). None: these members cannot
        go as one array (the core then submits them one by one).
    :raises SubmitRefused: the scheduler refused the array; every member's first
        submission is recorded as failed with its words.
    :raises Unreachable: the scheduler could not be asked; dispatch asks again later.
    """


@needed("optional")
@hookspec(firstresult=True)
def dispatch_prepare_array(
    group_id: str, members: Sequence[ArrayMember], max_running: int | None
) -> Prepared | None:
    """Build the ONE object :func:`dispatch_submit_array` would send for these members,
    sending nothing (optional; only called on a backend that declares ``arrays``).

    ``dispatch submit --sweep ... --dry-run`` and ``Client.dry_run_sweep`` print it, so a
    sweep's dry run is the array that is sent: the backend's
    :func:`dispatch_submit_array` must send exactly this (build it here and send it
    there: one function builds both). Without this hook a sweep's dry run says the
    members go as one array and shows each member's spec. Like :func:`dispatch_prepare`
    it may read the scheduler but never changes anything there or on disk.

    :param group_id: the sweep's group id, as :func:`dispatch_submit_array` gets it.
    :param members: as :func:`dispatch_submit_array` gets them (every member of the
        sweep, in member order, at least two).
    :param max_running: the sweep's bound on members running at once, or None.
    :return: a :class:`dispatch.Prepared` whose ``job_id`` is ``group_id`` (submission 1,
        not gated); None when these members cannot go as one array, exactly when
        :func:`dispatch_submit_array` would answer None (the dry run then shows each
        member's own submission).
    :raises SubmitRefused: the array cannot be sent as it is (words a user can act on).
    :raises Unreachable: what the preparation reads could not be read now.
    """


@needed("optional")
@hookspec(firstresult=True)
def dispatch_validate(spec: JobSpec) -> None:
    """Refuse a spec this backend cannot run, before anything is recorded (optional).

    Called by ``dispatch submit`` (and ``--dry-run``) after the core checked the spec's
    options and capabilities against the declarations. Must not contact the scheduler.

    :return: None when the backend can run it.
    :raises BadInput: what cannot be run and why, in words a user can act on (e.g.
        "--workdir: a TrainJob has no working directory; cd inside the command").
    """


@needed("optional")
@hookspec(firstresult=True)
def dispatch_check(spec: JobSpec) -> None:
    """Refuse what the scheduler's present state makes impossible, before anything is
    recorded (optional): a queue, partition or priority class the job names that does
    not exist there, a feature of the scheduler the job asks for that is not installed.

    Called by ``dispatch submit`` (``--dry-run``, ``--save`` and ``--sweep`` too) and by
    every :class:`dispatch.Client` method that records a job or shows a dry run, once per
    job or sweep, right after :func:`dispatch_validate` accepted the spec (for a sweep,
    the first member's: members differ in command, name and environment only). Unlike
    :func:`dispatch_validate` it may read the scheduler, and only read it: list what
    exists in one call per kind (so a refusal can name the alternatives), never create
    or change anything. A backend that leaves it out is checked when its submit is
    refused instead (the job is then recorded, its first submission ``launch-failed``).

    :param spec: the spec as :func:`dispatch_validate` saw it.
    :return: None when the scheduler can take the job as it is now.
    :raises BadInput: what the job names that the scheduler does not have, and where it
        was given, with what the scheduler has instead (e.g. "-o queue='team-x': no
        LocalQueue of that name in namespace default (it has: team-a, team-b)").
        Nothing is recorded.
    :raises Unreachable: the scheduler could not be read now; nothing is recorded and the
        message says the check could not be made. Except for one job recorded for a
        supervisor to submit (``dispatch submit --no-start``, ``Client.submit(...,
        start=False)``), which may be recorded where the scheduler cannot be reached: it
        is recorded unchecked, and its submission meets the scheduler's own refusal.
    """


@needed("deprecated")
@hookspec(
    firstresult=True,
    warn_on_impl=DeprecationWarning(
        "dispatch_render is deprecated since api_version 2: implement dispatch_prepare "
        "and dispatch_send, whose Prepared the dry run prints"
    ),
)
def dispatch_render(  # type: ignore[empty-body]
    job_id: str, submission: int, spec: JobSpec, gated: bool
) -> str:
    """What :func:`dispatch_submit` would send, as text, sending nothing (deprecated:
    replaced by :func:`dispatch_prepare`, whose result is both shown and sent).

    Still called by ``dispatch submit --dry-run`` for a backend without
    :func:`dispatch_prepare`. Must not contact the scheduler.

    :param spec: the spec as the submit would get it (``native_actions`` set).
    :return: the text the dry run prints.
    :raises BadInput: the spec cannot be rendered, in words a user can act on.
    """


@needed("logs")
@hookspec(firstresult=True)
def dispatch_logs(  # type: ignore[empty-body]
    object_id: str, selection: LogSelection
) -> Iterable[bytes]:
    """What one submission printed, every execution of it in order, in chunks (S-46).

    :param object_id: the submission's scheduler object (from the record or a discovery).
    :param selection: a :class:`dispatch.LogSelection` the core already checked:
        ``job_id`` and ``submission`` name the object's job and submission; ``stream``
        (a :class:`dispatch.Stream`), ``node`` or ``rank`` narrow it; ``offset`` bytes
        of it were read already and are skipped (``dispatch logs --follow`` asks again
        from where it stopped, so the backend never needs state). ``tail`` is applied by
        the core.
    :return: chunks of bytes, lazily (a generator), so a large log streams with flat
        memory. Nothing printed yet (or nothing for that node) is an empty iterable.
    :raises BadInput: the node or rank is not one the submission ran on, or the stream
        is one this scheduler does not keep apart.
    :raises Unreachable: the scheduler (or the file system holding the output) could not
        be read now.
    """


#: Every hook, in the order above.
HOOKS: dict[str, Callable[..., Any]] = {
    name: value
    for name, value in list(globals().items())
    if name.startswith("dispatch_") and hasattr(value, f"{PROJECT}_spec")
}


def needed_for(hook: str) -> str:
    """When a backend must implement ``hook`` (a key of :data:`NEEDED`)."""
    return str(HOOKS[hook].dispatch_needed)  # type: ignore[attr-defined]


def hooks_needed(when: str) -> tuple[str, ...]:
    return tuple(name for name in HOOKS if needed_for(name) == when)


def raises(hook: str) -> tuple[str, ...]:
    """The exception names the hook's docstring documents (its ``:raises X:`` lines)."""
    return tuple(re.findall(r"^\s*:raises (\w+):", inspect.getdoc(HOOKS[hook]) or "", re.M))


def contract_table() -> str:
    """The hook table of ``docs/adapters.md``, made from the specs."""
    rows = [
        "| hook | arguments | returns | needed | raises |",
        "|---|---|---|---|---|",
    ]
    for name, spec in HOOKS.items():
        signature = inspect.signature(spec)
        arguments = ", ".join(signature.parameters)
        returns = str(signature.return_annotation).replace("|", "or")
        errors = ", ".join(f"`{e}`" for e in raises(name)) or "—"
        rows.append(
            f"| `{name}` | {arguments or '—'} | `{returns}` | {NEEDED[needed_for(name)]} "
            f"| {errors} |"
        )
    return "\n".join(rows) + "\n"
