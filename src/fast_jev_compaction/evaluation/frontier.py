"""The loss/reduction frontier of cut policies, to choose a default from measurements.

A policy cuts unpinned results to a digest (head, or head and tail). *Judge* policies cut a call
when its keep_result per 10,000 characters the cut frees is below a price: one price for every
compaction, so the trade-off is the same everywhere (a per-compaction budget would force cuts of
valuable outputs in compactions that have little to free). *Size* policies cut every result over
a length, the "cut results over 8,000 chars" rule generalised. Each compacted prefix is measured
like the pipeline's (:func:`.outcome.measure`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, ToolCall
from .outcome import rewritten

PRICES = (0.25, 0.5, 1.0, 2.0, 4.0)  # keep_result per 10,000 chars freed
LENGTHS = (2000, 4000, 8000, 16000)
DIGESTS: Mapping[str, tuple[int, int]] = {"head 300": (300, 0), "head 500 + tail 500": (500, 500)}
# a cut must save more than its own note (as in the pipeline's truncation)
_MARGIN = 120


@dataclass(frozen=True)
class Policy:
    ranker: str  # "judge" or "size"
    digest: str  # a key of DIGESTS
    level: float  # judge: the price; size: the length over which a result is cut

    @property
    def name(self) -> str:
        if self.ranker == "judge":
            return f"judge under {self.level:g} per 10k chars, {self.digest}"
        return f"results over {int(self.level):,} chars, {self.digest}"


POLICIES = tuple(
    [Policy("judge", d, p) for d in DIGESTS for p in PRICES] + [Policy("size", d, n) for d in DIGESTS for n in LENGTHS]
)


def digest(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail + _MARGIN:
        return text
    cut = len(text) - head - tail
    ending = f"\n{text[len(text) - tail:]}" if tail else ""
    return f"{text[:head]}\n[{cut} chars cut]{ending}"


def cut_by_policy(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    originals: Mapping[str, str],
    keep_result: Callable[[ToolCall], float],
    policy: Policy,
) -> list[SessionMessage]:
    head, tail = DIGESTS[policy.digest]
    cut: dict[str, Callable[[str], str]] = {}
    for call in pairing.candidates:
        text = originals[call.tool_use_id]
        freed = len(text) - len(digest(text, head, tail))
        if freed <= 0:
            continue
        if policy.ranker == "judge":
            chosen = keep_result(call) * 10_000 / freed < policy.level
        else:
            chosen = call.result_chars > policy.level
        if chosen:
            cut[call.tool_use_id] = lambda original: digest(original, head, tail)
    return rewritten(messages, set(), cut)
