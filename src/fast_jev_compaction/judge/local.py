"""LocalJudge: the embedded, offline judge used when no Jev key is configured.

One fitted model (``judge/model.py``), two ways in:

- in process (:meth:`LocalJudge.score_calls`), the compaction hands it the messages and it reads
  the outputs themselves (``judge/features.py``), scored with ``judge/weights.json``;
- over the Jev protocol (``ask`` / ``answer``, what ``fast-jev serve`` calls), it gets a state
  and questions and computes the same features from what the state carries: notes, inputs,
  digests and the texts around each call (``judge/state_features.py`` says what differs),
  scored with ``judge/state_weights.json``, the same model fitted on those features.

Every answer is ``sigmoid(sum(contributions))``; :meth:`LocalJudge.explain` returns exactly those
contributions: the model's weighted features for a result, plus ``call_floor`` for a call (the
lift that :meth:`JudgeModel.keep_call` gives: its own scale, and its floor by kind and error).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, ToolCall
from ..state.asker import AskResult, Usage
from ..textutil import js_json
from .model import JudgeModel, load_state_model

# Reading a state (judge/state/, judge/state_features.py, tokens) is imported by the methods
# that take one: the compaction's in-process scoring, the hook's, never does.

__all__ = ["LocalJudge"]

_CACHE_SIZE = 4


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _logit(p: float) -> float:
    p = min(max(p, 1e-15), 1.0 - 1e-15)
    return math.log(p / (1.0 - p))


class LocalJudge:
    """Deterministic, offline judge; implements the ``JevAsker`` protocol."""

    def __init__(self, model: JudgeModel | None = None, state_model: JudgeModel | None = None) -> None:
        self._model = model
        self._state_model = state_model
        self._lock = threading.Lock()
        # state JSON -> {call id: features}: the questions about one state come in batches
        self._cache: OrderedDict[str, dict[str, dict[str, float]]] = OrderedDict()

    @property
    def state_model(self) -> JudgeModel:
        return self._state_model or load_state_model()

    def score_calls(
        self, messages: Sequence[SessionMessage], pairing: Pairing, goal: str, only: Iterable[ToolCall] | None = None
    ) -> dict[str, tuple[float, float]]:
        """``{tool_use_id: (keep_call, keep_result)}`` from the fitted model over the messages,
        for every completed call or for those in ``only``.

        In process the judge reads the outputs themselves (``judge/features.py``), not the Jev
        state's notes and digests: the compaction calls this instead of ``ask`` when it can.
        """
        from .model import score_calls

        return score_calls(messages, pairing, goal, self._model, only=only)

    async def ask(self, state: Any, questions: Mapping[str, Any]) -> AskResult:
        answers, usage = self.answer_with_usage(state, questions)
        return AskResult(answers=answers, usage=usage)

    # The same answers without an event loop: `fast-jev serve` answers from its worker threads.
    def answer(self, state: Any, questions: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Raw Jev answers: ``{name: {"type": "noul", "noul": p}}`` for every question."""
        return self.answer_with_usage(state, questions)[0]

    def answer_with_usage(self, state: Any, questions: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], Usage]:
        from ..state.tokens import estimate_tokens

        state_json, scored = self._score(state, questions)
        answers = {
            name: {"type": "noul", "noul": _sigmoid(sum(parts.values()))} for name, parts in scored.items()
        }
        usage = Usage(
            input_tokens=estimate_tokens(state_json) + estimate_tokens(js_json(dict(questions))),
            output_tokens=len(answers),
        )
        return answers, usage

    def explain(self, state: Any, questions: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """Per question, the named logit contributions; ``sigmoid(sum)`` is the answer."""
        return self._score(state, questions)[1]

    def _features(self, state: Mapping[str, Any]) -> tuple[str, dict[str, dict[str, float]]]:
        from .state import read_state
        from .state_features import state_features

        key = js_json(state)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return key, cached
        features = state_features(read_state(state))  # outside the lock; a duplicate build is harmless
        with self._lock:
            self._cache[key] = features
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return key, features

    def _score(self, state: Any, questions: Mapping[str, Any]) -> tuple[str, dict[str, dict[str, float]]]:
        from .state import parse_question, validate_questions, validate_state
        from .state_features import question_features, sized

        mapping = validate_state(state)
        validate_questions(questions)
        state_json, features = self._features(mapping)
        model = self.state_model
        scored: dict[str, dict[str, float]] = {}
        for name, raw in questions.items():
            question = parse_question(name, raw)
            if question.which not in ("call", "result"):
                # not a compaction question: no call to look at, so no evidence either way
                scored[name] = {"bias": 0.0}
                continue
            values = features.get(question.call_id) or question_features(question)
            if question.chars is not None:
                values = sized(values, question.chars)  # the question names the size too; it wins
            parts = model.contributions(values)
            if question.which == "call":
                keep_result = _sigmoid(sum(parts.values()))
                keep_call = model.keep_call(values, keep_result)
                if keep_call > keep_result:
                    parts["call_floor"] = _logit(keep_call) - _logit(keep_result)
            scored[name] = parts
        return state_json, scored
