"""Writing a dispatch backend, in short. The contract is :mod:`dispatch.hookspecs` (one
docstring per hook); ``docs/adapters.md`` holds its table and what to report.

1. Register one object under the entry-point group ``dispatch.backends``; the entry-point
   name is the backend's name. A class is instantiated with no arguments (read
   configuration from the environment)::

       [project.entry-points."dispatch.backends"]
       mysched = "dispatch_mysched.backend:MySchedBackend"

2. Implement the hooks, each marked with :data:`hookimpl`::

       from dispatch import Declarations, Prepared, hookimpl
       from dispatch.hookspecs import API_VERSION

       class MySchedBackend:
           @hookimpl
           def dispatch_declare(self) -> Declarations:  # name, windows, reports, ...
               return Declarations(name="mysched", ..., api_version=API_VERSION)
           @hookimpl
           def dispatch_discover(self, job_ids): ...  # one listing, found by tags
           @hookimpl
           def dispatch_prepare(self, job_id, submission, spec, gated) -> Prepared: ...
           @hookimpl
           def dispatch_send(self, prepared) -> str: ...  # exactly what was prepared
           @hookimpl
           def dispatch_stop(self, object_id, cause): ...  # idempotent

   ``dispatch_open_gate`` and ``dispatch_logs`` come with the ``gating`` and ``logs``
   capabilities; ``dispatch_validate`` (the spec alone) and ``dispatch_check`` (the
   scheduler's present state: does the queue it names exist?) are optional. A backend
   may implement the one-step ``dispatch_submit`` instead of ``dispatch_prepare`` and
   ``dispatch_send``: it works the same, and its dry run shows the spec instead of what
   is sent.

3. Report each scheduler answer as ``docs/adapters.md`` says (one example object per row).

4. Prove it: ``dispatch-conformance mysched`` (dispatch-testing).

Keep the module light: import a heavy client library inside the hooks, so ``dispatch
--help`` does not pay for it.
"""

import pluggy

from dispatch.hookspecs import PROJECT

hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["hookimpl"]
