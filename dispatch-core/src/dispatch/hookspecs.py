"""Hook specifications: what a backend implements (S-30).

A backend is one plugin object registered under the entry-point group
``dispatch.backends`` (see :mod:`dispatch.plugin` for the tutorial). dispatch gives every
backend its own plugin manager, so a hook call reaches exactly the backend the user named;
an implementation never checks "is this call for me?". Every hook is ``firstresult``: the
backend's answer is the call's value.

Errors every hook may raise:

- :class:`dispatch.Unreachable` when the scheduler cannot be reached (timeouts, refused
  connections, a controller that is down). Never return a state for it (S-5).
- any other exception is a bug in the backend, reported with the backend's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from dispatch.core.cause import Cause
    from dispatch.model.declarations import Declarations
    from dispatch.model.discovery import Discovery
    from dispatch.model.spec import JobSpec

PROJECT = "dispatch"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec(firstresult=True)
def dispatch_declare() -> Declarations:  # type: ignore[empty-body]
    """Describe the backend: its name, node-loss window, pending windows, natively
    enforced actions, the cause kinds it can report, its capabilities and options.

    Called once when the backend is loaded and bound into every plan. Must not contact the
    scheduler: ``dispatch backends`` lists declarations on a machine with no cluster.

    :return: a :class:`dispatch.Declarations` whose ``name`` is the entry-point name.
    """


@hookspec(firstresult=True)
def dispatch_discover(job_ids: Sequence[str]) -> Discovery:  # type: ignore[empty-body]
    """Show what the scheduler knows now about every object of these jobs, in one go.

    :param job_ids: dispatch job ids, at most ``Declarations.max_discovery_batch`` of them.
        The cost must not grow in scheduler calls with their number (S-32): one listing,
        filtered by the tags :func:`dispatch_submit` put on the objects.
    :return: a :class:`dispatch.Discovery` stamped with the time it was taken. Ids the
        scheduler does not know are absent, not errors. Every object the scheduler still
        lists is present, ended ones included, with every execution it can tell about.
        An answer the adapter cannot map is an object with cause ``unknown`` and the
        answer verbatim in ``detail`` (S-4).
    :raises Unreachable: the scheduler could not be asked; never a partial answer.
    """


@hookspec(firstresult=True)
def dispatch_submit(  # type: ignore[empty-body]
    job_id: str, submission: int, spec: JobSpec, gated: bool
) -> str:
    """Create the scheduler object for submission ``submission`` of job ``job_id``.

    :param spec: what to run and with which resources; ``spec.options`` holds only names
        the declarations list.
    :param gated: create the object so that it does not start until
        :func:`dispatch_open_gate` (S-28); only called with True on a backend that declares
        the ``gating`` capability.
    :return: the scheduler's object id. The object must be tagged so that
        :func:`dispatch_discover` finds it by job id and submission number even if this
        return value is lost (a crash right after submitting, S-34).
    :raises SubmitRefused: the scheduler refused it; ``detail`` holds its words verbatim.
        Also the refusal of a spec asking for a capability the declarations lack (nodes > 1
        without ``multi-node``, GPUs, a time limit, ``exclude_nodes``, ``gated``): the
        core checks capabilities before recording, this is the last line, and the kit
        requires ``SubmitRefused`` for it. dispatch records a refusal as a failed
        submission with those words; any other error but ``Unreachable`` is a fault in the
        backend, recorded as a failed submission too (``BackendFailed`` naming the hook),
        never retried for ever. (An object
        the scheduler accepted and then failed to start is discovered as ended with
        ``launch-failed`` instead.)

    ``spec.script`` is the text of a script file, not a path: run it by its own ``#!``
    line, never through ``sh``. ``spec.exclude_nodes`` (with the ``exclude-nodes``
    capability) names nodes the object must keep off (S-43).
    """


@hookspec(firstresult=True)
def dispatch_open_gate(object_id: str) -> None:
    """Let a gated object start (Slurm ``scontrol release``, TrainJob ``suspend: false``).

    Called only after the discovery showed every older object of the job ended (S-28),
    and only for an object submitted gated, so only on a backend that declares the
    ``gating`` capability: a backend without it never receives this call (the kit
    checks it) and leaves the hook out; declaring ``gating`` without it is refused when
    the backend is loaded.

    :param object_id: the id :func:`dispatch_submit` returned (or discovery showed).
    :return: None. Idempotent: opening an open gate, or the gate of an ended or unknown
        object, is not an error.
    :raises Unreachable: the scheduler could not be asked; dispatch asks again next tick.
    """


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


# Optional hooks: a backend may leave them out; dispatch then does without (no validation
# beyond the declarations, no dry-run rendering) or refuses (``logs`` without the ``logs``
# capability).


@hookspec(firstresult=True)
def dispatch_validate(spec: JobSpec) -> None:
    """Refuse a spec this backend cannot run, before anything is recorded (optional).

    Called by ``dispatch submit`` (and ``--dry-run``) after the core checked the spec's
    options and capabilities against the declarations. Must not contact the scheduler.

    :return: None when the backend can run it.
    :raises BadInput: what cannot be run and why, in words a user can act on (e.g.
        "--workdir: a TrainJob has no working directory; cd inside the command").
    """


@hookspec(firstresult=True)
def dispatch_render(  # type: ignore[empty-body]
    job_id: str, submission: int, spec: JobSpec, gated: bool
) -> str:
    """Exactly what :func:`dispatch_submit` would send, as text, sending nothing (optional).

    ``dispatch submit --dry-run`` prints it: the sbatch script and argv, the TrainJob
    manifest as YAML, the local runner's argv and environment. Must not contact the
    scheduler.

    :param spec: the spec as :func:`dispatch_submit` would get it (``native_actions`` set).
    :return: the text; a backend without this hook makes ``--dry-run`` print the spec only.
    """


@hookspec(firstresult=True)
def dispatch_logs(  # type: ignore[empty-body]
    job_id: str,
    submission: int,
    object_id: str,
    stream: str,
    node: str | None,
    rank: int | None,
    offset: int,
) -> Iterable[bytes]:
    """What one submission printed, every execution of it in order, in chunks (S-46).

    Implemented by a backend that declares the ``logs`` capability (and only by one).

    :param object_id: the submission's scheduler object (from the record or a discovery).
    :param stream: ``"stdout"`` or ``"stderr"``.
    :param node: only what tasks on this node printed (None: all nodes, in node order).
    :param rank: only what this rank printed (None: every rank).
    :param offset: bytes of this selection already read, to skip: ``dispatch logs
        --follow`` asks again from where it stopped, so the backend never needs state.
    :return: chunks of bytes, lazily (a generator), so a large log streams with flat
        memory. Nothing printed yet (or nothing for that node) is an empty iterable.
    :raises BadInput: the node or rank is not one the submission ran on.
    :raises Unreachable: the scheduler (or the file system holding the output) could not
        be read now.
    """
