"""How to write a dispatch backend, in one page.

A backend is a distribution that registers one object under the entry-point group
``dispatch.backends``; the entry-point name is the backend's name::

    # pyproject.toml of dispatch-mysched
    [project.entry-points."dispatch.backends"]
    mysched = "dispatch_mysched.backend:MySchedBackend"

The object is a class (instantiated with no arguments; read configuration from the
environment) or a module. It implements the hooks of :mod:`dispatch.hookspecs`, each
marked with :data:`hookimpl`::

    from dispatch import Declarations, Discovery, SubmitRefused, hookimpl

    class MySchedBackend:
        @hookimpl
        def dispatch_declare(self) -> Declarations: ...
        @hookimpl
        def dispatch_discover(self, job_ids): ...
        @hookimpl
        def dispatch_submit(self, job_id, submission, spec, gated): ...
        @hookimpl
        def dispatch_stop(self, object_id, cause): ...
        @hookimpl
        def dispatch_open_gate(self, object_id): ...  # only with the gating capability

Which hooks:

- ``dispatch_declare``, ``dispatch_discover``, ``dispatch_submit``, ``dispatch_stop``:
  always.
- ``dispatch_open_gate``: only a backend that declares the ``gating`` capability needs
  it. dispatch submits gated only to such a backend and opens only gates it closed, so a
  backend without ``gating`` never receives the call (the kit checks it, end to end). Such
  a backend leaves it out; one that declares ``gating`` without it is refused at load.
- ``dispatch_logs`` with the ``logs`` capability (and only then); ``dispatch_validate``
  and ``dispatch_render`` when you can check a spec or show a dry run without the scheduler.

What to report: ``dispatch_discover`` fills one :class:`dispatch.ObjectView` per scheduler
object (phase, cause kind, provenance, the scheduler's words in ``detail``, executions).
``dispatch-core/docs/adapters.md`` is the table: for each thing a scheduler says, what each
field holds, with one example object per row. It answers what the models alone do not:

- dispatch's own stop ends an object ``cancelled`` with provenance ``actor`` (the
  ``cause.actor`` ``dispatch_stop`` was given); someone else's cancel is ``scheduler``;
- an answer you cannot map is ``unknown`` (provenance ``scheduler``, the answer verbatim
  in ``detail``) and its phase comes from the scheduler's timestamps, never from the word:
  ``ended`` only if the run shows an end, else ``running`` if it started, else ``pending``;
- ``reports`` lists ``none`` (every backend reports successes; the plan ignores it) and
  must list ``unknown``;
- an ended object needs a ``cause``, not an ``Execution``: it carries one per run the
  scheduler tells about (none if it never started).

What you are given: :class:`dispatch.JobSpec`. ``command`` is an argv, never a shell
string. ``script`` is the **text** of a script file (what ``dispatch submit --script FILE``
read), not a path: run it by its own ``#!`` line (write it to a file and exec it, or hand
it to a scheduler that does), never through ``sh`` — the kit submits a Python script. A
spec asking for a capability you do not declare (more nodes, GPUs, a time limit, a gate,
``exclude_nodes``) is refused with :class:`dispatch.SubmitRefused`, which dispatch records
as a failed submission; never ignore it, and never raise another error for it (any other
error from a submit is a fault in the backend, wrapped in ``BackendFailed``).

Keep the module light: import a heavy client library inside the hooks, not at the top, so
``dispatch --help`` does not pay for it. Then prove it with
``dispatch-conformance mysched`` (from dispatch-testing; its README shows the harness).
"""

import pluggy

from dispatch.hookspecs import PROJECT

hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["hookimpl"]
