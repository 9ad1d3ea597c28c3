"""The base of every config section: unknown keys and booleans for numbers are errors."""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class StrictModel(BaseModel):
    """Base for config sections: unknown keys are errors, assignments are validated.

    pydantic's own error text does not quote the input (a URL may carry ``user:key@``);
    :func:`validate` quotes values itself where that is safe.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads True as 1 for an int or float field; in a config that is a slip (a
        # flag written where a count belongs), so a field that takes numbers only refuses it.
        if isinstance(value, bool) and info.field_name is not None:
            kinds = _number_kinds(cls.model_fields[info.field_name].annotation)
            if kinds:
                raise ValueError(f"must be {kinds}, got the boolean {value}")
        return value


def _number_kinds(annotation: Any) -> str | None:
    """'an integer' or 'a number' when ``annotation`` takes only ints or floats (or None)."""
    union = get_origin(annotation) in (Union, UnionType)
    members = [a for a in (get_args(annotation) if union else (annotation,)) if a is not type(None)]
    if members and all(a in (int, float) for a in members):
        return "an integer" if members == [int] else "a number"
    return None
