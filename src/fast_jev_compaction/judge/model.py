"""The fitted judge: keep probabilities per call from :mod:`.features` and ``weights.json``.

``keep_result`` is a logistic model fitted on behavioural labels (``fast-jev eval --fit`` writes
the weights and the fit's report; see docs/judge-fit.md): the chance that the output is reused
verbatim later, which answers "should the full output stay?" as it is. ``keep_call`` answers
"should the call stay, at least as a digest?" from the same chance, on its own scale: as odds
over the odds at ``call_reuse_at_even``, the reuse risk it answers as 0.5 (``evaluation/fit.py``,
``CALL_REUSE_AT_EVEN``, says why), a monotone map. Beyond that, losing the *record* of a call
costs most when the call changed something, asked the user, ran a sub-agent or failed, so
``keep_call`` is ``1 - (1 - that answer) * (1 - floor)`` with the floor of the call's kind (and
the error floor for a failed call), all read from the same file. It is never below keep_result.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, ToolCall
from .features import FEATURE_NAMES, KINDS, call_features

WEIGHTS_PATH = Path(__file__).with_name("weights.json")
# The same model fitted on the features a Jev state carries (judge/state_features.py): what the
# judge behind `fast-jev serve` scores with. `fast-jev eval --fit-state` rewrites it.
STATE_WEIGHTS_PATH = Path(__file__).with_name("state_weights.json")
FORMAT = 1


class ModelError(ValueError):
    """The weights file is missing, unreadable or not in the expected shape."""


def _logit(p: float) -> float:
    p = min(max(p, 1e-15), 1.0 - 1e-15)
    return math.log(p / (1.0 - p))


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True)
class JudgeModel:
    """A fitted logistic model: keep_result from weighted features, keep_call floored by kind."""

    bias: float
    weights: Mapping[str, float]
    call_floors: Mapping[str, float] = field(default_factory=dict)  # kind -> floor
    error_floor: float = 0.0
    fit: Mapping[str, Any] = field(default_factory=dict)  # the fit's report, for display
    call_reuse_at_even: float = 0.5  # the reuse risk keep_call answers as 0.5 (before its floor)

    def contributions(self, values: Mapping[str, float]) -> dict[str, float]:
        """The named logit terms of keep_result (``bias`` included); their sum is its logit."""
        terms = {"bias": self.bias}
        for name, weight in self.weights.items():
            value = values.get(name, 0.0)
            if weight and value:
                terms[name] = weight * value
        return terms

    def keep_result(self, values: Mapping[str, float]) -> float:
        return _sigmoid(sum(self.contributions(values).values()))

    def keep_call(self, values: Mapping[str, float], keep_result: float) -> float:
        kind = next((k for k in KINDS if values.get(f"kind_{k}")), "other")
        floor = self.call_floors.get(kind, 0.0)
        if values.get("is_error"):
            floor = max(floor, self.error_floor)
        keep = keep_result
        if self.call_reuse_at_even != 0.5:
            keep = _sigmoid(_logit(keep_result) - _logit(self.call_reuse_at_even))
        # max(): with no floor the product form can land one ulp below keep_result
        return max(keep_result, 1.0 - (1.0 - keep) * (1.0 - floor))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "keep_result": {"bias": self.bias, "weights": dict(self.weights)},
            "keep_call": {
                "floors": dict(self.call_floors),
                "error_floor": self.error_floor,
                "reuse_at_even": self.call_reuse_at_even,
            },
            "fit": dict(self.fit),
        }


def parse_model(data: Any) -> JudgeModel:
    try:
        if data["format"] != FORMAT:
            raise ModelError(f"weights format {data['format']!r}, expected {FORMAT}")
        result = data["keep_result"]
        weights = {str(k): float(v) for k, v in result["weights"].items()}
        unknown = sorted(set(weights) - set(FEATURE_NAMES))
        if unknown:
            raise ModelError(f"weights name unknown features: {', '.join(unknown)}")
        call = data.get("keep_call", {})
        floors = {str(k): float(v) for k, v in call.get("floors", {}).items()}
        model = JudgeModel(
            bias=float(result["bias"]),
            weights=weights,
            call_floors=floors,
            error_floor=float(call.get("error_floor", 0.0)),
            fit=dict(data.get("fit", {})),
            call_reuse_at_even=float(call.get("reuse_at_even", 0.5)),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"weights are not in the expected shape: {exc}") from exc
    values = [model.bias, model.error_floor, *model.weights.values(), *model.call_floors.values()]
    if not all(math.isfinite(v) for v in values):
        raise ModelError("weights must be finite numbers")
    if not all(0.0 <= v <= 1.0 for v in (model.error_floor, *model.call_floors.values())):
        raise ModelError("keep_call floors must lie in [0, 1]")
    if not 0.0 < model.call_reuse_at_even < 1.0:  # NaN included
        raise ModelError("keep_call's reuse_at_even must lie strictly between 0 and 1")
    return model


def load_model(path: str | Path | None = None) -> JudgeModel:
    """The model in ``path``, or the shipped ``judge/weights.json`` (read once)."""
    if path is None:
        return _shipped()
    return _read(Path(path))


def _read(path: Path) -> JudgeModel:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read judge weights {path}: {exc}") from exc
    return parse_model(data)


@lru_cache(maxsize=1)
def _shipped() -> JudgeModel:
    return _read(WEIGHTS_PATH)


def load_state_model(path: str | Path | None = None) -> JudgeModel:
    """The model for features read from a state: ``path``, or the shipped ``judge/state_weights.json``."""
    return _read(Path(path)) if path is not None else _shipped_state()


@lru_cache(maxsize=1)
def _shipped_state() -> JudgeModel:
    return _read(STATE_WEIGHTS_PATH)


def score_calls(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    goal: str,
    model: JudgeModel | None = None,
    only: Iterable[ToolCall] | None = None,
) -> dict[str, tuple[float, float]]:
    """``{tool_use_id: (keep_call, keep_result)}`` for every completed call of ``pairing``, or
    for the calls in ``only``."""
    model = model or load_model()
    scores: dict[str, tuple[float, float]] = {}
    for tool_use_id, values in call_features(messages, pairing, goal, only=only).items():
        keep_result = model.keep_result(values)
        scores[tool_use_id] = (model.keep_call(values, keep_result), keep_result)
    return scores
