"""Strict validation of raw Jev ``answers`` objects and tolerant reading of ``usage``.

Every asker (HTTP client, embedded judge, custom) is held to these rules by the core, so a bad
answer can never turn into a silent keep/drop decision. One answer's shape is
``protocol.NoulAnswer``, validated with pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..errors import JevResponseError
from .asker import Usage
from .protocol import ANSWER_ADAPTER

MISSING_ANSWERS = "Jev response is missing answers"


def _noul_value(answer: Any) -> float | None:
    """The probability carried by one answer, or ``None`` when it is not a valid ``NoulAnswer``."""
    try:
        return ANSWER_ADAPTER.validate_python(answer)["noul"]
    except ValidationError:
        return None


def read_noul_answers(answers: Any, names: Sequence[str]) -> dict[str, float]:
    """Return ``{name: probability}`` for every name, or raise one error listing every bad name.

    The batch is all-or-nothing: one invalid answer rejects the whole set, and the error names all
    offenders in the order of ``names`` so the log shows the full picture at once.
    """
    if not isinstance(answers, Mapping):
        raise JevResponseError(MISSING_ANSWERS)
    values: dict[str, float] = {}
    bad: list[str] = []
    for name in names:
        if name in values or name in bad:
            continue
        value = _noul_value(answers[name]) if name in answers else None
        if value is None:
            bad.append(name)
        else:
            values[name] = value
    if bad:
        raise JevResponseError(f"Invalid Jev answer for {', '.join(bad)}", names=bad)
    return values


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def read_usage(obj: Any) -> Usage:
    """Token usage from a response's ``usage`` object; anything missing or odd counts as 0.

    Usage is informational only, so a malformed ``usage`` must never fail a request.
    """
    if not isinstance(obj, Mapping):
        return Usage()
    return Usage(input_tokens=_count(obj.get("input_tokens")), output_tokens=_count(obj.get("output_tokens")))
