"""Whether a pass replaces the conversation, skips, or hands over to the built-in summary.

A ratio of characters is the wrong unit once a session has been compacted before: a second pass
over an already pruned history frees little, and "below 25 %" used to mean "summarise", which
threw away the verbatim history the first pass kept. The gate speaks in points of the context
window instead, as the trigger does:

- under ``targetPercent`` there is nothing to do: the pass skips (and a pass that frees nothing
  there skips too: "nothing left to prune" is not a failure);
- a pass replaces when it brings the context under the target, or frees at least
  ``minFreedPercent`` points of the window;
- only when pruning cannot reach either does the built-in summary run; except that the plugin's
  own trigger never summarises a history with nothing left to prune: it skips, and the engine's
  own compaction stays the backstop when the window really fills (otherwise each re-fire after
  usage grew in turns without new tool output would throw the verbatim history away).

This applies to the compactions the user or the plugin asks for (``manual``, ``plugin``). The
engine's own (``auto``, ``precompute``) fire when the engine's limit is reached, which may be
its ``--autocompact`` figure rather than a share of the window: the context must shrink, so
``minReductionRatio`` decides there, as it always did, and so it does when the engine did not say
how full the window is (right after a compaction it does not know yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, TypeGuard

from ..stats import CompactStats, percent

# Characters per token of a Claude Code conversation (code, logs and JSON): an estimate, used
# only to turn the characters a pass frees into points of the window.
CHARS_PER_TOKEN = 3.5


@dataclass(frozen=True)
class Window:
    """How full the context window is, as the engine measured it before the compaction."""

    tokens: int
    size: int

    @property
    def percent(self) -> float:
        return 100.0 * self.tokens / self.size

    def percent_after(self, freed_chars: int) -> float:
        return 100.0 * max(0.0, self.tokens - freed_chars / CHARS_PER_TOKEN) / self.size


def _positive_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def window_of(context: Any) -> Window | None:
    """The engine's ``$.session.usage().context`` (``{tokens, window, percent}``), when usable."""
    if not isinstance(context, Mapping):
        return None
    tokens, size = context.get("tokens"), context.get("window")
    return Window(int(tokens), int(size)) if _positive_number(tokens) and _positive_number(size) else None


Verdict = Literal["replace", "skip", "fallback"]


@dataclass(frozen=True)
class GateResult:
    verdict: Verdict
    reason: str
    category: str | None = None  # the decision log's fallback category


def points(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") + "%"


# Compactions someone asked for; the engine's own triggers must free room whatever the window says.
WINDOW_TRIGGERS = frozenset({"manual", "plugin"})


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
) -> GateResult:
    freed = max(0, stats.chars_before - stats.chars_after)
    if window is None or trigger not in WINDOW_TRIGGERS:
        if stats.reduction_ratio < min_reduction_ratio:
            return GateResult(
                "fallback", f"below {percent(min_reduction_ratio)} minimum", "below-ratio"
            )
        return GateResult("replace", f"{percent(stats.reduction_ratio)} of the conversation freed")
    before, after = window.percent, window.percent_after(freed)
    moved = f"context {points(before)} → {points(after)}"
    if freed == 0:
        if before < target_percent or trigger == "plugin":
            where = "under" if before < target_percent else "over"
            return GateResult("skip", f"nothing left to prune; {moved}, {where} the {points(target_percent)} target")
        return GateResult("fallback", f"nothing left to prune and the context is at {points(before)}", "below-target")
    if after <= target_percent or before - after >= min_freed_percent:
        return GateResult("replace", moved)
    return GateResult(
        "fallback",
        f"pruning frees only {points(before - after)} of the window ({moved}), short of the "
        f"{points(target_percent)} target and the {points(min_freed_percent)} minimum",
        "below-target",
    )
