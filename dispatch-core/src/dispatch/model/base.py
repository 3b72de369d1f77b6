"""The base of every dispatch model: frozen, no unknown fields, strict decoding.

Decoding (``model_validate`` / ``model_validate_json``) turns pydantic's ValidationError
into ``DecodeError`` naming the field and the value (S-6), so every caller handles one
error whatever the format, and a record written by a newer build is refused, not misread.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from dispatch.model.errors import DecodeError

_M = TypeVar("_M", bound=BaseModel)


def decode_error(what: str, exc: ValidationError) -> DecodeError:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or "<root>"
    value = first.get("input")
    if first.get("type") in ("union_tag_invalid", "union_tag_not_found") and isinstance(
        value, dict
    ):
        field = ".".join([*field.split(".")[:-1], "type"]) if field != "<root>" else "type"
        value = value.get("type")
    shown = value if not isinstance(value, dict) else "{...}"
    message = f"cannot decode {what}: field {field!r} = {shown!r}: {first.get('msg')}"
    more = exc.error_count() - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return DecodeError(message, field=field, value=value)


class Model(BaseModel):
    # defer_build: a model's validator is compiled on first use, not at import, so a
    # command that touches a few models does not pay for all of them (CLI start-up).
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, defer_build=True)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise decode_error(cls.__name__, exc) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, **kwargs)
        except ValidationError as exc:
            raise decode_error(cls.__name__, exc) from None

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """Build from values the core assembled itself out of already-validated models
        (``fold``), skipping validation: it is most of the cost of a fold. Every field
        must be given, already of its declared type; a property test checks that a
        trusted model equals the validated one.
        """
        return build(cls, values)


def every_field(cls: type[BaseModel]) -> set[str]:
    """One set of all of ``cls``'s field names, shared by every model built with all of
    them. A frozen model never changes its fields-set in place (``model_copy`` copies it
    first), and a set each costs 300-700 bytes: a folded job holds ~30 models, and
    memory per job is what bounds a supervisor of 50,000 jobs."""
    names = _EVERY.get(cls)
    if names is None:
        names = _EVERY[cls] = set(cls.__pydantic_fields__)
    return names


_EVERY: dict[type[BaseModel], set[str]] = {}
_set = object.__setattr__
_new = object.__new__


def build(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.trusted(**values)`` without the keyword round trip; ``values`` becomes the
    model's ``__dict__`` (the caller hands it over and keeps no reference)."""
    model = _new(cls)
    _set(model, "__dict__", values)
    names = _EVERY.get(cls) or every_field(cls)
    _set(model, "__pydantic_fields_set__", names if len(values) == len(names) else set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model
