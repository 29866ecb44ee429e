"""Rows for fitting the judge that reads states: the same calls and labels as :mod:`.fit`, with
the features computed from the Jev states the compaction would send (``judge/state_features.py``)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ..judge.state import read_state
from ..judge.state_features import state_features
from ..messages import SessionMessage
from ..options import CompactOptions
from ..pairing import Pairing
from ..questions import question_tokens
from ..windows import plan_requests
from .fit import Row, session_rows
from .labels import OutputLabel


def state_values(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    goal: str,
    max_state_tokens: float | None = None,
    max_request_tokens: float | None = None,
) -> dict[str, dict[str, float]]:
    """``{tool_use_id: features}`` of every candidate, read from the states that would carry its
    questions (every candidate asked, none settled by a rule), at the default budgets or these."""
    defaults = CompactOptions()
    costs = {call.id: question_tokens(call) for call in pairing.candidates}
    requests = plan_requests(
        messages, pairing, list(pairing.candidates), goal, defaults.preserve_recent_messages,
        max_state_tokens or defaults.max_state_tokens, max_request_tokens or defaults.max_request_tokens, costs,
    )
    values: dict[str, dict[str, float]] = {}
    read: dict[int, dict[str, dict[str, float]]] = {}  # a state shared by several requests is read once
    for request in requests:
        features = read.get(id(request.state))
        if features is None:
            features = read[id(request.state)] = state_features(read_state(request.state))
        for call in request.calls:
            values[call.tool_use_id] = features[call.id]
    return values


def state_rows(
    messages: Sequence[SessionMessage],
    group: str,
    fractions: Iterable[float],
    labels: Mapping[str, OutputLabel] | None = None,
    source: str = "",
) -> list[Row]:
    """:func:`.fit.session_rows` with the features read from the states."""
    return session_rows(messages, group, fractions, labels, features_of=state_values, source=source)
