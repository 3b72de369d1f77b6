"""Finding, loading and calling backends (S-31).

Each backend gets its own pluggy ``PluginManager`` holding the hook specs and exactly one
plugin, so ``backend.discover(...)`` reaches that backend and no other, while pluggy still
validates every implementation against its spec when it is registered and
``check_pending()`` refuses a misspelt hook at load time.

Entry points are listed without importing them; a backend's module is imported only when
that backend is asked for, so a heavy client library costs nothing to the others.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from dispatch import hookspecs
from dispatch.core.cause import Cause
from dispatch.model.declarations import Declarations
from dispatch.model.discovery import Discovery
from dispatch.model.enums import Capability
from dispatch.model.errors import (
    BackendBroken,
    BackendFailed,
    BadInput,
    DispatchError,
    SubmitRefused,
    UnknownBackend,
    Unreachable,
)
from dispatch.model.spec import JobSpec

GROUP = "dispatch.backends"

#: The exceptions each hook's spec documents (``hookspecs.py``): they pass through the
#: boundary as raised. ``Unreachable`` is documented for every hook that asks the scheduler.
DOCUMENTED: dict[str, tuple[type[BaseException], ...]] = {
    "dispatch_declare": (),
    "dispatch_discover": (Unreachable,),
    "dispatch_submit": (Unreachable, SubmitRefused),
    "dispatch_open_gate": (Unreachable,),
    "dispatch_stop": (Unreachable,),
    "dispatch_validate": (BadInput,),
    "dispatch_render": (BadInput,),
    "dispatch_logs": (Unreachable, BadInput),
}


class Backend:
    """One loaded backend: typed calls to exactly its own hook implementations.

    Every call goes through one error boundary (S-50, :meth:`_call`): the exceptions the
    hook's spec documents pass through; anything else, and an answer of the wrong type,
    becomes :class:`~dispatch.model.errors.BackendFailed` naming the backend and the hook.
    """

    def __init__(
        self, name: str, plugin: object, distribution: str = "", version: str = ""
    ) -> None:
        self.name = name
        self.distribution = distribution
        self.version = version
        self.plugin = plugin
        manager = pluggy.PluginManager(hookspecs.PROJECT)
        manager.add_hookspecs(hookspecs)
        try:
            manager.register(plugin, name=name)
            manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise BackendBroken(f"backend {name!r} does not match the hook specs: {exc}") from exc
        missing = [spec for spec in _HOOKS if not getattr(manager.hook, spec).get_hookimpls()]
        if missing:
            raise BackendBroken(f"backend {name!r} does not implement {', '.join(missing)}")
        self._hook = manager.hook

    def _call(self, hook: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._hook, hook)(**kwargs)
        except DOCUMENTED[hook]:
            raise
        except Exception as exc:
            raise BackendFailed(
                f"backend {self.name!r}: {hook} raised {type(exc).__name__}: {exc} "
                "(a fault in the backend; dispatch goes on with the others)",
                backend=self.name,
                hook=hook,
            ) from exc

    def _wrong(self, hook: str, result: object, wanted: str) -> BackendFailed:
        return BackendFailed(
            f"backend {self.name!r}: {hook} returned {result!r:.200}, not {wanted}",
            backend=self.name,
            hook=hook,
        )

    @cached_property
    def declarations(self) -> Declarations:
        result = self._call("dispatch_declare")
        if not isinstance(result, Declarations):
            raise self._wrong("dispatch_declare", type(result).__name__, "Declarations")
        if result.name != self.name:
            raise BackendBroken(
                f"backend registered as {self.name!r} declares the name {result.name!r}"
            )
        for capability, hook in _HOOKS_FOR.items():
            if capability in result.capabilities and not getattr(self._hook, hook).get_hookimpls():
                raise BackendBroken(
                    f"backend {self.name!r} declares {capability.value!r} but does not "
                    f"implement {hook}"
                )
        return result

    def discover(self, job_ids: Sequence[str]) -> Discovery:
        result = self._call("dispatch_discover", job_ids=list(job_ids))
        if not isinstance(result, Discovery):
            raise self._wrong("dispatch_discover", type(result).__name__, "a Discovery")
        return result

    def submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        result = self._call(
            "dispatch_submit", job_id=job_id, submission=submission, spec=spec, gated=gated
        )
        if not isinstance(result, str) or not result:
            raise self._wrong("dispatch_submit", result, "an object id (a non-empty str)")
        return result

    def open_gate(self, object_id: str) -> None:
        self._call("dispatch_open_gate", object_id=object_id)

    def stop(self, object_id: str, cause: Cause) -> None:
        self._call("dispatch_stop", object_id=object_id, cause=cause)

    def validate(self, spec: JobSpec) -> None:
        self._call("dispatch_validate", spec=spec)

    def render(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str | None:
        """None when the backend does not implement the optional hook."""
        result = self._call(
            "dispatch_render", job_id=job_id, submission=submission, spec=spec, gated=gated
        )
        return None if result is None else str(result)

    def logs(
        self,
        job_id: str,
        submission: int,
        object_id: str,
        *,
        stream: str = "stdout",
        node: str | None = None,
        rank: int | None = None,
        offset: int = 0,
    ) -> Iterable[bytes]:
        result = self._call(
            "dispatch_logs",
            job_id=job_id,
            submission=submission,
            object_id=object_id,
            stream=stream,
            node=node,
            rank=rank,
            offset=offset,
        )
        return () if result is None else result


_HOOKS = (
    "dispatch_declare",
    "dispatch_discover",
    "dispatch_submit",
    "dispatch_stop",
)
#: hooks a backend needs only when it declares the capability
_HOOKS_FOR = {Capability.GATING: "dispatch_open_gate", Capability.LOGS: "dispatch_logs"}


@dataclass(frozen=True)
class Available:
    """An installed backend, known from its entry point without importing it."""

    name: str
    distribution: str
    version: str
    entry_point: EntryPoint | None = None
    plugin: object | None = None

    def load(self) -> Backend:
        try:
            target = self.plugin if self.plugin is not None else self.entry_point.load()  # type: ignore[union-attr]
            plugin = target() if inspect.isclass(target) else target
        except DispatchError:
            raise
        except Exception as exc:  # a third party's import error must not crash us
            raise BackendBroken(
                f"backend {self.name!r} from {self.distribution or 'an unknown distribution'} "
                f"failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        backend = Backend(self.name, plugin, self.distribution, self.version)
        backend.declarations  # noqa: B018 - validate the declaration at load time
        return backend


class Registry:
    """The installed backends: entry points plus any plugins given directly (tests, kit)."""

    def __init__(
        self, available: Iterable[Available], broken: Mapping[str, str] | None = None
    ) -> None:
        self._available: dict[str, Available] = {}
        self.broken: dict[str, str] = dict(broken or {})
        for item in available:
            if item.name in self._available:
                first = self._available.pop(item.name)
                self.broken[item.name] = (
                    f"two distributions register the backend {item.name!r}: "
                    f"{first.distribution} and {item.distribution}; uninstall one"
                )
            elif item.name not in self.broken:
                self._available[item.name] = item
        self._loaded: dict[str, Backend] = {}

    @classmethod
    def from_entry_points(cls) -> Registry:
        items = []
        for ep in entry_points(group=GROUP):
            dist = ep.dist
            items.append(
                Available(
                    name=ep.name,
                    distribution=dist.metadata["Name"] if dist else "",
                    version=dist.version if dist else "",
                    entry_point=ep,
                )
            )
        return cls(items)

    @classmethod
    def from_plugins(cls, plugins: Mapping[str, object]) -> Registry:
        return cls(Available(name, "", "", plugin=p) for name, p in plugins.items())

    def names(self) -> list[str]:
        return sorted(self._available)

    def describe(self, name: str) -> Available:
        return self._available[name]

    def get(self, name: str) -> Backend:
        if name in self._loaded:
            return self._loaded[name]
        if name in self.broken:
            raise BackendBroken(f"backend {name!r} is installed but broken: {self.broken[name]}")
        if name not in self._available:
            known = ", ".join(self.names()) or "none"
            raise UnknownBackend(
                f"backend {name!r} can't be found, is its plugin installed? "
                f"(installed backends: {known})"
            )
        try:
            backend = self._available[name].load()
        except BackendBroken as exc:
            self.broken[name] = str(exc)
            raise
        self._loaded[name] = backend
        return backend

    def load_all(self) -> tuple[dict[str, Backend], dict[str, str]]:
        """Every backend that loads, and every one that does not with its error."""
        good: dict[str, Backend] = {}
        for name in self.names():
            try:
                good[name] = self.get(name)
            except BackendBroken:
                pass
        return good, dict(self.broken)

    def add(self, name: str, plugin: Any) -> Backend:
        """Register a plugin object directly (tests and the conformance kit)."""
        self._available[name] = Available(name, "", "", plugin=plugin)
        self._loaded.pop(name, None)
        return self.get(name)
