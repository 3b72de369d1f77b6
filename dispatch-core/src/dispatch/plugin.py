"""How to write a dispatch backend, in one page.

A backend is a distribution that registers one object under the entry-point group
``dispatch.backends``; the entry-point name is the backend's name::

    # pyproject.toml of dispatch-mysched
    [project.entry-points."dispatch.backends"]
    mysched = "dispatch_mysched.backend:MySchedBackend"

The object is a class (instantiated with no arguments; read configuration from the
environment) or a module. It implements the hooks of :mod:`dispatch.hookspecs`, each
marked with :data:`hookimpl`::

    from dispatch import Declarations, Discovery, hookimpl

    class MySchedBackend:
        @hookimpl
        def dispatch_declare(self) -> Declarations: ...
        @hookimpl
        def dispatch_discover(self, job_ids): ...
        @hookimpl
        def dispatch_submit(self, job_id, submission, spec, gated): ...
        @hookimpl
        def dispatch_open_gate(self, object_id): ...
        @hookimpl
        def dispatch_stop(self, object_id, cause): ...

Keep the module light: import a heavy client library inside the hooks, not at the top, so
``dispatch --help`` does not pay for it. Then prove it with
``dispatch-conformance mysched`` (from dispatch-testing).
"""

import pluggy

from dispatch.hookspecs import PROJECT

hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["hookimpl"]
