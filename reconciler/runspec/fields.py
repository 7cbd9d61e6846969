"""The building blocks of the run spec's fields: friendly quantities, the words the schema carries
for a range or a type, constrained maps, and the strict base every part of a spec is made on.

Owns: ``_quantity`` (``_bytes``, ``_seconds``: an int that also takes ``120Gi`` or ``1h30m``),
``_names_then_values``, ``_range_message``, ``_typed`` (schema edits that keep a message apart
from a limit), ``_Text``/``_Arg``/``_LABEL`` (text limits) and ``_Strict`` (the base model).
Private to the spec layer: ``models`` is made of them (and ``secrets``' models read the same
rules); nothing outside ``runspec`` imports them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, field_validator

from . import messages as msg
from .quantities import BYTES_PATTERN, POSITIVE_DURATION_PATTERN, parse_bytes, parse_duration

__all__: list[str] = []  # private building blocks, imported by name within runspec


def _quantity(parse, pattern: str, message: str, title: str, description: str, minimum: int):
    """An int that also accepts a friendly string; its schema admits both, with one message."""

    def before(value: Any) -> Any:
        if isinstance(value, str | int) and not isinstance(value, bool):
            try:
                return parse(value)
            except ValueError:
                return value  # not a quantity: the schema's pattern says so
        return value

    return Annotated[
        int,
        BeforeValidator(before),
        Field(ge=minimum),
        WithJsonSchema(
            {
                "title": title,
                "description": description,
                "type": ["integer", "string"],
                "minimum": minimum,
                "pattern": pattern,
                "errorMessage": message,
            }
        ),
    ]


def _bytes(title: str, description: str):
    return _quantity(parse_bytes, BYTES_PATTERN, msg.BYTES, title, description, 0)


def _seconds(title: str, description: str):
    return _quantity(parse_duration, POSITIVE_DURATION_PATTERN, msg.DURATION, title, description, 1)


def _names_then_values(pattern: str, message: str):
    """Draft-07 for a map with constrained keys: ``propertyNames`` and ``additionalProperties``.

    pydantic writes a key pattern as ``patternProperties``, which lets other keys through.
    """

    def extra(schema: dict[str, Any]) -> None:
        (values,) = schema.pop("patternProperties").values()
        schema["propertyNames"] = {
            "pattern": pattern,
            "errorMessage": message,
            "allOf": [{"maxLength": msg.TEXT_MAX}],
        }
        schema["additionalProperties"] = values

    return extra


def _range_message(message: str, keys: tuple[str, ...] = ("minimum", "maximum")):
    """A message for a number's range, kept away from its type.

    The range keywords and the ``errorMessage`` move into an ``allOf`` entry: a value out of
    range gets the message (in the CLI; the editor words ``minimum``/``maximum`` itself), and a
    value of the wrong type gets the plain type error in both, never a range sentence or an
    unfilled ``${1/size}``.
    """

    def extra(schema: dict[str, Any]) -> None:
        ranged = {k: schema.pop(k) for k in keys if k in schema}
        schema["allOf"] = [{**ranged, "errorMessage": message}]

    return extra


def _typed(message: str):
    """A value's own ``errorMessage`` (for its type), with its length limit kept apart.

    The length moves into an ``allOf`` entry of its own, so that a value too long gets the
    plain length words and a value of the wrong type gets ``message``.
    """

    def extra(schema: dict[str, Any]) -> None:
        schema["errorMessage"] = message
        if "maxLength" in schema:
            schema["allOf"] = [{"maxLength": schema.pop("maxLength")}]

    return extra


#: Text of a key or value with no tighter rule of its own (``TEXT_MAX`` characters).
_Text = Annotated[str, Field(max_length=msg.TEXT_MAX)]
#: One argument or environment value (``ARG_MAX`` characters, Linux's limit for one).
_Arg = Annotated[str, Field(max_length=msg.ARG_MAX)]
_LABEL = _typed(msg.LABEL_VALUE)


class _Strict(BaseModel):
    """Every part of a spec refuses fields it does not know (``unknown field 'X'``).

    Values are read as the published JSON Schema reads them, so that the model and
    ``validate_data`` accept the same documents:

    * ``strict``: pydantic's lax mode would take ``true`` or ``"10"`` for an integer and
      ``"yes"`` for a boolean, which the schema refuses. The schema's one leniency, a whole
      float such as ``2.0`` for an integer, is kept (and becomes ``2``).
    * an optional field may be left out, not given as ``null`` (in a run spec that names a
      template, ``null`` removes the template's value; the merged spec has no nulls left).
      Dump with ``exclude_none=True`` to get a document this model reads back.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _as_the_schema_reads(cls, value: Any) -> Any:
        """No null; a whole float as an integer: JSON Schema's ``integer`` admits 2.0, so the
        model does (and turns it into 2). Called for every field of every run read: one call."""
        if value is None:
            raise ValueError("must not be null: leave the field out")
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value
