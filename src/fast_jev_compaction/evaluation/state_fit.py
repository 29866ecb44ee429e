"""Rows for fitting the judge that reads states: the same calls and labels as :mod:`.fit`, with
the features computed from the Jev states the compaction would send (``judge/state_features.py``)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing
from ..judge.features import FEATURE_NAMES
from ..judge.state import read_state
from ..judge.state_features import state_features
from ..options import CompactOptions
from ..state.questions import question_tokens
from ..state.windows import plan_requests
from .fit import FEATURE_GROUPS, UNFITTED_GROUPS, Row, session_rows
from .labels import OutputLabel

# Left out of the state judge's fit (judge/state_weights.json), chosen as the embedded judge's
# were (evaluation/fit.py, UNFITTED_GROUPS): by the AUC of each source scored by the judge fitted
# without it (claude-code-log and entire-checkpoints; spotter has too few reused outputs), taking
# groups out one at a time. Over the states' features the search takes out the same groups but two:
# prompts after, a target named later and ``tiny`` first (mean held-out AUC 0.867 with every
# feature, 0.873 without them), then within noise the goal overlap, ``superseded`` and ``ids``.
# It keeps the tool kinds and the positions as fractions of the session, which the embedded judge
# leaves out: a state shows an output as a one-line note and a 300-character digest, and what
# kind of call made it says what the digest cannot. With the embedded judge's own choice the
# held-out AUCs fall (0.861 and 0.853 against 0.880 and 0.867 with these; leave-one-session-out
# 0.858 against 0.879; 80 corpus files). The goal overlap and ``ids`` stay, as in the embedded
# judge, for the same reasons.
STATE_UNFITTED_GROUPS = tuple(group for group in UNFITTED_GROUPS if group not in ("kind", "session_fraction"))
STATE_FITTED_FEATURES: tuple[str, ...] = tuple(
    name for name in FEATURE_NAMES if not any(name in FEATURE_GROUPS[group] for group in STATE_UNFITTED_GROUPS)
)


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
