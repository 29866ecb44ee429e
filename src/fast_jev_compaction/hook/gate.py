"""Whether a pass replaces the conversation, skips, or hands over to the built-in summary.

A ratio of characters is the wrong unit once a session has been compacted before: a second pass
over an already pruned history frees little, and "below 25 %" used to mean "summarise", which
threw away the verbatim history the first pass kept. The gate speaks in points of a window
instead, and "nothing left to prune" is never a failure. By who asked for the compaction:

- ``plugin`` (the mod's trigger at ``compactAtPercent``): under ``targetPercent`` of the model's
  window it skips before any work; a pass replaces when it brings the context under the target
  or frees at least ``minFreedPercent`` points; one that frees nothing skips, however full the
  window (the engine's own compaction is the backstop); only a pass that frees too little
  hands over to the summary.
- ``manual`` (``/compact``): the person asked for a compaction, so a pass that frees anything
  replaces and one that frees nothing skips, saying so (a summary is not what they asked for
  from this plugin, and it would throw away the verbatim history).
- ``auto`` and ``precompute`` (the engine at its own threshold): judged against what made the
  engine fire, its ``autoCompactThreshold`` in its compaction window (the mod reads both from
  the usage breakdown). While the model's window still has the engine's buffer free beyond the
  context (a compaction window smaller than the model's, as ``--autocompact`` or the settings
  give), the engine can go on: a pass that frees anything replaces and one that frees nothing
  skips, under the threshold or over it (the engine then shows "not compacted", carries on with
  the turn and asks again at its next check). With that room gone, a pass replaces when it
  brings the context under the threshold or frees ``minFreedPercent`` points, else the summary
  runs: a session that cannot send its next request is worse than a summary. A pass that
  frees nothing never replaces. Without the engine's figures (a subagent's transcript: the usage is the main
  conversation's) a pass that frees anything replaces and one that frees nothing falls back.

``minReductionRatio`` set above 0 restores the ratio for every trigger: below it the summary
runs, as before the window gate (the plugin trigger's two skips stay).

The engine's figures are its last request's input: the response to that request, and whatever
came after it, are not in them (measured in the real ``claude``: a 27.5k-token reply left out of
a context the engine itself counted at 189k). :func:`unmeasured_tokens` estimates them from the
messages, and the window a pass is judged in holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence, TypeGuard

from ..conversation.messages import SessionMessage
from ..conversation.sizes import message_chars
from ..decide.policy import CHARS_PER_TOKEN
from ..stats import CompactStats, percent


@dataclass(frozen=True)
class Window:
    """How full a context window is (tokens of ``size``), as the engine measured it before the compaction."""

    tokens: int
    size: int

    @property
    def percent(self) -> float:
        return 100.0 * self.tokens / self.size

    def tokens_after(self, freed_chars: int) -> float:
        return max(0.0, self.tokens - freed_chars / CHARS_PER_TOKEN)

    def percent_after(self, freed_chars: int) -> float:
        return 100.0 * self.tokens_after(freed_chars) / self.size


@dataclass(frozen=True)
class EngineLimit:
    """Where the engine's own compaction fires: the context in its compaction window, its
    threshold there, and the model's window."""

    window: Window
    threshold: int
    model_window: int

    def has_room(self, freed_chars: int) -> bool:
        """Whether the model's window still holds the engine's buffer beyond the context."""
        buffer = self.window.size - self.threshold
        return self.window.tokens_after(freed_chars) + buffer < self.model_window


def _positive_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def unmeasured_tokens(messages: Sequence[SessionMessage]) -> int:
    """Tokens of the messages the engine's figures leave out, at ``CHARS_PER_TOKEN``: the last
    response (its text and calls, one assistant message per block) and every message after it
    (results, a new prompt). Thinking is not in a message's text, so it is not counted."""
    start = len(messages)
    while start > 0 and messages[start - 1].role != "assistant":
        start -= 1
    while start > 0 and messages[start - 1].role == "assistant":
        start -= 1
    if start == 0 and (not messages or messages[0].role != "assistant"):
        return 0  # no response yet: the figures hold every message
    return round(sum(message_chars(m) for m in messages[start:]) / CHARS_PER_TOKEN)


def window_of(context: Any, unmeasured: int = 0) -> Window | None:
    """The engine's ``$.session.usage().context`` (``{tokens, window, percent}``), when usable,
    holding the ``unmeasured`` tokens too."""
    if not isinstance(context, Mapping):
        return None
    tokens, size = context.get("tokens"), context.get("window")
    return Window(int(tokens) + unmeasured, int(size)) if _positive_number(tokens) and _positive_number(size) else None


def engine_limit_of(context: Any, unmeasured: int = 0) -> EngineLimit | None:
    """``context.compaction`` as the mod reads it from the usage breakdown (``{tokens, window,
    threshold}``: ``totalTokens``, ``rawMaxTokens``, ``autoCompactThreshold``), beside the model's
    ``window``; None when any figure is missing (auto-compaction off, an older engine). The
    context is the larger of the breakdown's count and the plain ``tokens`` with the
    ``unmeasured`` ones: the breakdown's count was the last request's input in the real
    ``claude``, and holding the reply already, it is not counted twice."""
    if not isinstance(context, Mapping) or not isinstance(figures := context.get("compaction"), Mapping):
        return None
    tokens, size, threshold, model = (figures.get("tokens"), figures.get("window"), figures.get("threshold"), context.get("window"))
    if not (_positive_number(tokens) and _positive_number(size) and _positive_number(threshold) and _positive_number(model)):
        return None
    if threshold > size:
        return None
    measured = context.get("tokens")
    whole = int(measured) + unmeasured if _positive_number(measured) else 0
    return EngineLimit(Window(max(int(tokens), whole), int(size)), int(threshold), int(model))


Verdict = Literal["replace", "skip", "fallback"]


@dataclass(frozen=True)
class GateResult:
    """Whether a pass's history replaces the context, and why."""

    verdict: Verdict
    reason: str
    category: str | None = None  # the decision log's fallback category


def points(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") + "%"


def tokens_text(value: float) -> str:
    return f"{value / 1000:.1f}".rstrip("0").rstrip(".") + "k"


# The engine's own compactions: they fire at its threshold, not at a share of the model's window.
ENGINE_TRIGGERS = frozenset({"auto", "precompute"})
NOTHING_LEFT = "nothing left to prune"


def before_pass(window: Window | None, trigger: str, target_percent: float) -> GateResult | None:
    """Skip at once when the plugin's own trigger finds the window under the target."""
    if window is None or trigger != "plugin" or window.percent >= target_percent:
        return None
    return GateResult("skip", f"context at {points(window.percent)} is under the {points(target_percent)} target")


def after_pass(
    stats: CompactStats,
    window: Window | None,
    trigger: str,
    *,
    target_percent: float,
    min_freed_percent: float,
    min_reduction_ratio: float,
    engine: EngineLimit | None = None,
) -> GateResult:
    freed = max(0, stats.chars_before - stats.chars_after)
    if freed == 0 and trigger == "plugin":
        return _nothing_left(window, target_percent)
    if min_reduction_ratio > 0:
        if stats.reduction_ratio < min_reduction_ratio:
            return GateResult("fallback", f"below {percent(min_reduction_ratio)} minimum", "below-ratio")
        return GateResult("replace", _freed(stats))
    if trigger in ENGINE_TRIGGERS:
        return _engine_gate(stats, freed, engine, min_freed_percent)
    if trigger != "plugin":  # manual: the person asked for a compaction
        if freed == 0:
            return _nothing_left(window, target_percent)
        moved = _moved(window, freed) if window is not None else _freed(stats)
        return GateResult("replace", moved)
    return _plugin_gate(stats, freed, window, target_percent, min_freed_percent)


def _freed(stats: CompactStats) -> str:
    """What a pass freed when no window tells it in points: a share of the conversation."""
    return f"{percent(stats.reduction_ratio)} of the conversation freed"


def _moved(window: Window, freed: int) -> str:
    return f"context {points(window.percent)} → {points(window.percent_after(freed))}"


def _nothing_left(window: Window | None, target_percent: float) -> GateResult:
    if window is None:
        return GateResult("skip", NOTHING_LEFT)
    where = "under" if window.percent < target_percent else "over"
    return GateResult("skip", f"{NOTHING_LEFT}; {_moved(window, 0)}, {where} the {points(target_percent)} target")


def _plugin_gate(
    stats: CompactStats, freed: int, window: Window | None, target_percent: float, min_freed_percent: float
) -> GateResult:
    if window is None:
        return GateResult("replace", _freed(stats))
    before, after = window.percent, window.percent_after(freed)
    moved = _moved(window, freed)
    if after <= target_percent or before - after >= min_freed_percent:
        return GateResult("replace", moved)
    return GateResult(
        "fallback",
        f"pruning frees only {points(before - after)} of the window ({moved}), short of the "
        f"{points(target_percent)} target and the {points(min_freed_percent)} minimum",
        "below-target",
    )


def _engine_gate(stats: CompactStats, freed: int, engine: EngineLimit | None, min_freed_percent: float) -> GateResult:
    if engine is None:
        if freed == 0:
            return GateResult("fallback", f"{NOTHING_LEFT} and the engine's window is not known", "below-target")
        return GateResult("replace", _freed(stats))
    window = engine.window
    before, after = window.percent, window.percent_after(freed)
    moved = f"context {points(before)} → {points(after)} of the {tokens_text(window.size)}-token compaction window"
    threshold = f"the engine's {tokens_text(engine.threshold)} threshold"
    side = "under" if window.tokens_after(freed) < engine.threshold else "over"
    if freed == 0:  # the engine fired: its history as it is answers nothing
        if engine.has_room(0):
            return GateResult("skip", f"{NOTHING_LEFT}; {moved}, {side} {threshold} with room left in the model's window")
        return GateResult(
            "fallback", f"{NOTHING_LEFT}; {moved}, {side} {threshold} and the model's window is full", "below-target"
        )
    if side == "under":
        return GateResult("replace", f"{moved}, under {threshold}")
    if engine.has_room(freed):
        return GateResult("replace", f"{moved}, over {threshold} with room left in the model's window")
    if before - after >= min_freed_percent:
        return GateResult("replace", moved)
    return GateResult(
        "fallback",
        f"pruning cannot bring the context under {threshold} ({moved}) and the model's window is full",
        "below-target",
    )
