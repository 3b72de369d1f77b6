"""The labels and annotations a user puts on a TrainJob: ``-o label=K=V[,K=V...]`` and
``-o annotation=K=V[,K=V...]`` (also from profiles and job files). Pure.

A backend option holds one text (the core keeps options as a mapping, so a second
``-o label=...`` replaces the first, as it does for every option), hence the pairs are
comma-separated; ``\\,`` is a comma inside an annotation's value. Keys and values are
checked by Kubernetes' own rules before anything is recorded, so a bad one is refused
with the rule it breaks and never sent; the domains whose labels dispatch, Kueue, JobSet
and the Trainer read to find and run the job are refused, with why.
"""

from __future__ import annotations

import re

#: label and annotation key domains a user may not set, and why
RESERVED = {
    "dispatch.dev": "dispatch's own (it finds and tells apart its objects by them)",
    "kueue.x-k8s.io": "Kueue's (use -o queue and -o priority)",
    "jobset.sigs.k8s.io": "JobSet's (dispatch finds a job's pods by them)",
    "trainer.kubeflow.org": "the Trainer's",
}

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_COMMA = re.compile(r"(?<!\\),")


def parse(text: str, option: str) -> tuple[dict[str, str], list[str]]:
    """``K=V,K=V`` as pairs in order, and what is wrong with the text itself."""
    pairs: dict[str, str] = {}
    problems: list[str] = []
    for item in _COMMA.split(text):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.replace("\\,", ",")
        if not sep or not key:
            problems.append(f"-o {option}: {item!r} is not KEY=VALUE")
        elif key in pairs:
            problems.append(f"-o {option}: {key!r} is given twice")
        else:
            pairs[key] = value
    return pairs, problems


def key_problem(key: str) -> str | None:
    """What keeps ``key`` from being a label or annotation key (``[prefix/]name``: the
    prefix a DNS subdomain of at most 253 characters, the name at most 63 characters of
    letters, digits, ``-``, ``_`` and ``.``, starting and ending alphanumeric), its
    domain reserved, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "has an empty prefix before '/'"
    if not name:
        return "has an empty name"
    if len(name) > 63:
        return f"has a name of {len(name)} characters; at most 63"
    if not _NAME.match(name):
        return (
            "has a name that is not letters, digits, '-', '_' and '.', starting and ending "
            "with a letter or digit"
        )
    if prefix:
        if len(prefix) > 253:
            return f"has a prefix of {len(prefix)} characters; at most 253"
        if not all(_SUBDOMAIN_LABEL.match(part) for part in prefix.split(".")):
            return "has a prefix that is not a DNS subdomain (lower-case, dot-separated)"
        for domain, owner in RESERVED.items():
            if prefix == domain or prefix.endswith("." + domain):
                return f"is in {domain}, which is {owner}"
    return None


def value_problem(value: str) -> str | None:
    """What keeps ``value`` from being a label value (at most 63 characters of letters,
    digits, ``-``, ``_`` and ``.``, starting and ending alphanumeric; may be empty)."""
    if len(value) > 63:
        return f"is {len(value)} characters long; at most 63"
    if not _VALUE.match(value):
        return (
            "must be letters, digits, '-', '_' and '.', starting and ending with a letter "
            "or digit (a label value)"
        )
    return None


#: Kubernetes' bound on all annotations of one object together (keys and values)
ANNOTATIONS_MAX = 256 * 1024


def problems(option: str, text: str | None) -> list[str]:
    """Everything wrong with ``-o label`` (``option == "label"``) or ``-o annotation``."""
    if text is None:
        return []
    pairs, found = parse(text, option)
    for key, value in pairs.items():
        if (problem := key_problem(key)) is not None:
            found.append(f"-o {option}: the key {key!r} {problem}")
        if option == "label" and (problem := value_problem(value)) is not None:
            found.append(f"-o {option}: the value of {key!r} ({value!r}) {problem}")
    if option == "annotation":
        size = sum(len(k.encode()) + len(v.encode()) for k, v in pairs.items())
        if size > ANNOTATIONS_MAX:
            found.append(f"-o annotation: {size} bytes in all; Kubernetes takes at most 256 KiB")
    return found


def given(text: str | None, option: str) -> dict[str, str]:
    """The pairs of a text :func:`problems` found nothing wrong with."""
    return {} if text is None else parse(text, option)[0]
