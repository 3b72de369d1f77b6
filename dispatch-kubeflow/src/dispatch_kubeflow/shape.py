"""The type of every field the classifier reads, and the first field an object breaks.

Kubernetes types every field it serves, so a value of another type (a pod list item that
is a string, a container's ``waiting.reason`` that is a list) is an answer dispatch cannot
read. Reading around it would change what the object means without saying so (a pod
whose ``exitCode`` is text would drop out of the root cause, a condition whose ``status``
is a number would not be true), so the classifier's first row reports such an object
``unknown`` with the field and its raw value, bounded in length, and keeps it alive
(S-4, S-36). Only the fields below are checked: a field dispatch never reads cannot
change what it reports. A field that is absent or ``null`` is not set, not wrongly typed.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import TypeAlias

from dispatch_kubeflow import tags

#: a field's type: a leaf name, an object (field -> type) or a list of one type (a
#: one-element tuple)
Shape: TypeAlias = "str | Mapping[str, Shape] | tuple[Shape]"

TEXT, INT, BOOL, TIME, TAGS = "text", "integer", "boolean", "time", "text values"
#: what each leaf accepts; ``TIME`` is text (a time that does not parse is no time)
_LEAVES = {
    TEXT: lambda v: isinstance(v, str),
    TIME: lambda v: isinstance(v, str),
    INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    BOOL: lambda v: isinstance(v, bool),
    TAGS: lambda v: isinstance(v, Mapping) and all(isinstance(x, str) for x in v.values()),
}

CONDITIONS: Shape = (
    {"type": TEXT, "status": TEXT, "reason": TEXT, "message": TEXT, "lastTransitionTime": TIME},
)
METADATA: Shape = {
    "name": TEXT,
    "namespace": TEXT,
    "uid": TEXT,
    "labels": TAGS,
    "annotations": TAGS,
    "creationTimestamp": TIME,
    "deletionTimestamp": TIME,
}
_ENDED: Shape = {"exitCode": INT, "reason": TEXT, "message": TEXT, "finishedAt": TIME}
_STATE: Shape = {"terminated": _ENDED, "waiting": {"reason": TEXT, "message": TEXT}}

#: what discovery reads of each kind (``status.restarts`` of a JobSet has its own row)
KINDS: Mapping[str, Shape] = {
    "TrainJob": {
        "metadata": METADATA,
        "spec": {"suspend": BOOL},
        "status": {"conditions": CONDITIONS},
    },
    "JobSet": {"metadata": METADATA, "status": {"conditions": CONDITIONS}},
    "Job": {"metadata": METADATA, "status": {"conditions": CONDITIONS}},
    "Pod": {
        "metadata": METADATA,
        "spec": {
            "nodeName": TEXT,
            "containers": ({"env": ({"name": TEXT, "value": TEXT},)},),
        },
        "status": {
            "phase": TEXT,
            "reason": TEXT,
            "message": TEXT,
            "startTime": TIME,
            "conditions": CONDITIONS,
            "containerStatuses": ({"name": TEXT, "state": _STATE, "lastState": _STATE},),
        },
    },
    "Node": {"metadata": METADATA, "status": {"conditions": CONDITIONS}},
    "Workload": {"metadata": METADATA, "status": {"conditions": CONDITIONS}},
}

#: what tells which object an item belongs to: when one of these has the wrong type, the
#: item may be any wanted job's, so it cannot be skipped as someone else's
IDENTITY: Shape = {
    "metadata": {
        "name": TEXT,
        "namespace": TEXT,
        "uid": TEXT,
        "labels": {
            tags.JOB: TEXT,
            tags.SUBMISSION: TEXT,
            tags.JOBSET_NAME: TEXT,
            tags.KUEUE_JOB_UID: TEXT,
        },
        "annotations": {tags.JOB_ID: TEXT},
    }
}

#: how long a raw value may grow in ``detail``
MAX_RAW = 200
_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxdict, _repr.maxlist = 3, 4, 4
_repr.maxstring = _repr.maxother = _repr.maxlong = MAX_RAW


def raw(value: object) -> str:
    """A value as it was served, cut to about :data:`MAX_RAW` characters."""
    try:
        words = _repr.repr(value)
    except ValueError:  # an integer past the interpreter's digit limit
        words = f"<a {type(value).__name__} too long to show>"
    return words if len(words) <= MAX_RAW else words[: MAX_RAW - 3] + "..."


def _expected(shape: Shape) -> str:
    if isinstance(shape, str):
        return shape
    return "a list" if isinstance(shape, tuple) else "an object"


def problem(value: object, shape: Shape, path: str = "") -> str | None:
    """The first field of ``value`` that does not have its type: ``path is raw, not type``."""
    if isinstance(shape, str):
        ok = _LEAVES[shape](value)
    elif isinstance(shape, tuple):
        ok = isinstance(value, list)
    else:
        ok = isinstance(value, Mapping)
    if not ok:
        return f"{path or 'the item'} is {raw(value)}, not {_expected(shape)}"
    if isinstance(shape, tuple) and isinstance(value, list):
        for i, item in enumerate(value):
            if (found := problem(item, shape[0], f"{path}[{i}]")) is not None:
                return found
    elif isinstance(shape, Mapping) and isinstance(value, Mapping):
        for key, inner in shape.items():
            field = value.get(key)
            if field is None:
                continue
            step = f"{path}.{key}" if path and key.isidentifier() else f"{path}[{key!r}]"
            if (found := problem(field, inner, step if path else key)) is not None:
                return found
    return None


def _named(kind: str, obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{kind} {name}" if isinstance(name, str) and name else kind


def broken(kind: str, obj: object) -> str | None:
    """The words for the first wrongly typed field of one object of ``kind``, or None."""
    found = problem(obj, KINDS[kind])
    return None if found is None else f"{_named(kind, obj)}: {found}"


def unattributable(kind: str, obj: object) -> str | None:
    """The words for a listed item whose owner cannot be read, or None."""
    found = problem(obj, IDENTITY)
    if found is None:
        return None
    return f"a {kind} listed cannot be told apart: {_named(kind, obj)}: {found}"
