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
from dispatch.model import errors
from dispatch.model.declarations import Declarations
from dispatch.model.discovery import Discovery
from dispatch.model.enums import Capability
from dispatch.model.errors import (
    BackendBroken,
    BackendFailed,
    DispatchError,
    UnknownBackend,
)
from dispatch.model.prepared import Prepared
from dispatch.model.selection import LogSelection
from dispatch.model.spec import ArrayMember, JobSpec

GROUP = "dispatch.backends"

#: The exceptions each hook's spec documents (its ``:raises X:`` lines in ``hookspecs.py``):
#: they pass through the boundary as raised; anything else is the backend's fault.
DOCUMENTED: dict[str, tuple[type[BaseException], ...]] = {
    hook: tuple(getattr(errors, name) for name in hookspecs.raises(hook))
    for hook in hookspecs.HOOKS
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
        self._hook = manager.hook
        missing = [hook for hook in hookspecs.hooks_needed("always") if not self.implements(hook)]
        prepared = [self.implements(hook) for hook in hookspecs.hooks_needed("prepared")]
        if all(prepared) and self.implements("dispatch_submit"):
            raise BackendBroken(
                f"backend {name!r} implements dispatch_submit and dispatch_prepare with "
                "dispatch_send: implement one way to submit (dispatch would never call "
                "dispatch_submit)"
            )
        if any(prepared) and not all(prepared):
            missing += [h for h in hookspecs.hooks_needed("prepared") if not self.implements(h)]
        elif not all(prepared) and not self.implements("dispatch_submit"):
            missing.append("dispatch_submit (or dispatch_prepare and dispatch_send)")
        if missing:
            raise BackendBroken(f"backend {name!r} does not implement {', '.join(missing)}")

    def implements(self, hook: str) -> bool:
        return bool(getattr(self._hook, hook).get_hookimpls())

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
        if result.api_version > hookspecs.API_VERSION:
            raise BackendBroken(
                f"backend {self.name!r} is written for version {result.api_version} of the "
                f"hook contract; this dispatch knows version {hookspecs.API_VERSION} "
                "(upgrade dispatch-core)"
            )
        for capability, hooks in _HOOKS_FOR.items():
            for hook in hooks:
                if capability in result.capabilities and not self.implements(hook):
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

    @property
    def prepares(self) -> bool:
        """Whether the backend builds what it sends with ``dispatch_prepare``."""
        return self.implements("dispatch_prepare")

    def submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        """Prepare and send (or, for a backend without ``dispatch_prepare``, submit)."""
        if self.prepares:
            return self.send(self.prepare(job_id, submission, spec, gated))
        result = self._call(
            "dispatch_submit", job_id=job_id, submission=submission, spec=spec, gated=gated
        )
        return self._object_id("dispatch_submit", result)

    def prepare(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> Prepared:
        result = self._call(
            "dispatch_prepare", job_id=job_id, submission=submission, spec=spec, gated=gated
        )
        if not isinstance(result, Prepared):
            raise self._wrong("dispatch_prepare", type(result).__name__, "a Prepared")
        made = (result.backend, result.job_id, result.submission, result.gated)
        if made != (self.name, job_id, submission, gated):
            raise self._wrong("dispatch_prepare", made, f"one for {job_id!r} #{submission}")
        return result

    def send(self, prepared: Prepared) -> str:
        return self._object_id("dispatch_send", self._call("dispatch_send", prepared=prepared))

    def _object_id(self, hook: str, result: object) -> str:
        if not isinstance(result, str) or not result:
            raise self._wrong(hook, result, "an object id (a non-empty str)")
        return result

    def check_array(self, size: int, max_running: int | None) -> None:
        """Refuse a sweep of ``size`` members this backend could not take as one array
        (nothing to check on a backend without the ``arrays`` capability)."""
        if self.declarations.supports(Capability.ARRAYS):
            self._call("dispatch_check_array", size=size, max_running=max_running)

    @property
    def prepares_arrays(self) -> bool:
        """Whether the backend can show the one array it sends (``dispatch_prepare_array``;
        only a backend declaring ``arrays`` is asked)."""
        return self.declarations.supports(Capability.ARRAYS) and self.implements(
            "dispatch_prepare_array"
        )

    def prepare_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> Prepared | None:
        """What :meth:`submit_array` would send for these members, sending nothing; None
        when they cannot go as one array. Call only when :attr:`prepares_arrays`."""
        result = self._call(
            "dispatch_prepare_array",
            group_id=group_id,
            members=list(members),
            max_running=max_running,
        )
        if result is None:
            return None
        if not isinstance(result, Prepared):
            raise self._wrong("dispatch_prepare_array", type(result).__name__, "a Prepared")
        made = (result.backend, result.job_id, result.submission, result.gated)
        if made != (self.name, group_id, 1, False):
            raise self._wrong("dispatch_prepare_array", made, f"one for group {group_id!r}")
        return result

    def submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        """One object for these members' first submissions: one object id per member, in
        their order; None when the backend cannot make one array of them."""
        result = self._call(
            "dispatch_submit_array",
            group_id=group_id,
            members=list(members),
            max_running=max_running,
        )
        if result is None:
            return None
        if isinstance(result, (str, bytes)) or not isinstance(result, Sequence):
            raise self._wrong("dispatch_submit_array", result, "a list of object ids")
        ids = list(result)
        if len(ids) != len(members) or not all(isinstance(i, str) and i for i in ids):
            raise self._wrong(
                "dispatch_submit_array", ids, f"{len(members)} object ids (non-empty str)"
            )
        return ids

    def open_gate(self, object_id: str) -> None:
        self._call("dispatch_open_gate", object_id=object_id)

    def stop(self, object_id: str, cause: Cause) -> None:
        self._call("dispatch_stop", object_id=object_id, cause=cause)

    def validate(self, spec: JobSpec) -> None:
        self._call("dispatch_validate", spec=spec)

    def check(self, spec: JobSpec) -> None:
        """The optional ``dispatch_check``: refuse what the scheduler's present state
        makes impossible (nothing to check for a backend without the hook)."""
        self._call("dispatch_check", spec=spec)

    def render(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str | None:
        """The deprecated ``dispatch_render``'s text; None when it is not implemented."""
        result = self._call(
            "dispatch_render", job_id=job_id, submission=submission, spec=spec, gated=gated
        )
        return None if result is None else str(result)

    def logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        """One object's output; ``selection`` names its job and submission."""
        if selection.job_id is None or selection.submission is None:
            raise ValueError("logs: the selection names no job and submission (use .of())")
        result = self._call("dispatch_logs", object_id=object_id, selection=selection)
        return () if result is None else result


#: hooks a backend needs exactly when it declares the capability (from their ``needed``)
_HOOKS_FOR: dict[Capability, tuple[str, ...]] = {}
for _hook in hookspecs.HOOKS:
    if hookspecs.needed_for(_hook) in {c.value for c in Capability}:
        _capability = Capability(hookspecs.needed_for(_hook))
        _HOOKS_FOR[_capability] = (*_HOOKS_FOR.get(_capability, ()), _hook)


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
