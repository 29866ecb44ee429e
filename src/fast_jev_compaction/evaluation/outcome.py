"""What a compaction did to the outputs the rest of the session reused (post-fire loss).

For one fire point: the outputs present in the prefix that are reused after it are looked for in
the compacted prefix. An output is *whole* when its result text is still there unchanged; *in
context* when it is whole or when every snippet reused after the fire point is still somewhere in
the compacted context (a digest, a quote, a re-read); otherwise it is *gone*. A gone output is
*recoverable* when a marker in the compacted context names a saved file that holds it whole, or
a saved file whose own markers name one (``read_archived``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage, ToolResult
from ..conversation.pairing import Pairing, ToolCall
from ..judge.reuse import snippets, string_values
from .labels import OutputLabel

# A marker names where the whole output is: "saved at <path>", "saved to <path>", "full output: <path>".
MARKER_PATH = re.compile(r"(?:\bsaved (?:at|to)|\bfull output:)\s+(\S+?)(?=[;,)\]]?(?:\s|$))", re.IGNORECASE)
CUT_RULE_CHARS = 8000


@lru_cache(maxsize=4096)
def snippets_of(text: str) -> frozenset[str]:
    """Policies compared on one prefix share most texts: their snippets are computed once."""
    return frozenset(snippets(text))
CUT_RULE_HEAD = 300


@dataclass
class Outcome:
    """Counts for one policy at one or more fire points (they add up)."""

    present: int = 0  # outputs in the prefix
    reused: int = 0  # ... of which reused after the fire point
    reproducible: int = 0  # ... of which the session re-read or re-ran identically
    whole: int = 0
    in_context: int = 0
    gone: int = 0
    gone_partly: int = 0  # gone, but some of its reused snippets are still in the context
    gone_reproducible: int = 0  # gone, but the session re-read or re-ran it anyway
    recoverable: int = 0  # gone, but a marker's file holds it
    result_chars_before: int = 0
    result_chars_after: int = 0
    # the same over the unpinned calls only: what a compaction may touch
    unpinned_chars_before: int = 0
    unpinned_chars_after: int = 0

    def add(self, other: "Outcome") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Context:
    """What a compacted prefix still holds, in the terms the outcome needs."""

    results: dict[str, str]  # tool_use_id -> result text kept
    snippets: set[str]
    marker_paths: list[str]
    result_chars: int

    @classmethod
    def of(cls, messages: Sequence[SessionMessage]) -> "Context":
        results: dict[str, str] = {}
        found: set[str] = set()
        paths: list[str] = []
        chars = 0
        for message in messages:
            texts: list[str] = [message.text]
            for use in message.toolUses:
                texts.extend(string_values(use.input))
            for result in message.toolResults or ():
                results[result.tool_use_id] = result.text
                chars += len(result.text)
                texts.append(result.text)
            for text in texts:
                if text:
                    found |= snippets_of(text)
                    paths.extend(match.group(1) for match in MARKER_PATH.finditer(text))
        return cls(results, found, paths, chars)


# How many files the model Reads, following markers, to get an output back. An evicted turn's
# file holds the turn as the pass left it: a digest's marker names the output's own file, and the
# index line of a part of the turn moved earlier (while it was in flight) names that part's file,
# whose digests name theirs: the turn's file, the part's, the output's.
MARKER_HOPS = 3


def read_archived(paths: Iterable[str], archive: Mapping[str, str] | None = None) -> list[str]:
    """The texts the markers point at, and those the markers in them point at, ``MARKER_HOPS``
    files deep: from ``archive`` (path -> text) when given, else from disk."""
    texts: list[str] = []
    seen: set[str] = set()
    level = list(dict.fromkeys(paths))
    for _ in range(MARKER_HOPS):
        named: list[str] = []
        for path in level:
            if path in seen:
                continue
            seen.add(path)
            text = _read(path, archive)
            if text is not None:
                texts.append(text)
                named.extend(match.group(1) for match in MARKER_PATH.finditer(text))
        level = named
    return texts


def _read(path: str, archive: Mapping[str, str] | None) -> str | None:
    if archive is not None and path in archive:
        return archive[path]
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def measure(
    calls: Sequence[ToolCall],
    originals: Mapping[str, str],
    labels: Mapping[str, OutputLabel],
    fire: int,
    context: Context,
    result_chars_before: int,
    archive: Mapping[str, str] | None = None,
    gone: list[str] | None = None,
) -> Outcome:
    """The outcome of one compacted prefix; ``originals`` maps tool_use_id -> the uncut result.
    The tool_use_ids of the gone outputs are appended to ``gone`` when it is given."""
    unpinned = [call.tool_use_id for call in calls if not call.pinned]
    outcome = Outcome(
        present=len(calls),
        result_chars_before=result_chars_before,
        result_chars_after=context.result_chars,
        unpinned_chars_before=sum(len(originals[i]) for i in unpinned),
        unpinned_chars_after=sum(len(context.results.get(i, "")) for i in unpinned),
    )
    archived: list[str] | None = None
    for call in calls:
        label = labels.get(call.tool_use_id)
        if label is None or not label.needed_after(fire):
            continue
        outcome.reused += 1
        outcome.reproducible += 1 if label.reproducible else 0
        original = originals[call.tool_use_id]
        if context.results.get(call.tool_use_id) == original:
            outcome.whole += 1
            outcome.in_context += 1
            continue
        wanted = label.snippets_after(fire)
        if wanted <= context.snippets:
            outcome.in_context += 1
            continue
        outcome.gone += 1
        if gone is not None:
            gone.append(call.tool_use_id)
        outcome.gone_partly += 1 if wanted & context.snippets else 0
        outcome.gone_reproducible += 1 if label.reproducible else 0
        if archived is None:
            archived = read_archived(context.marker_paths, archive)
        if any(original in text for text in archived):
            outcome.recoverable += 1
    return outcome


def original_results(messages: Sequence[SessionMessage], pairing: Pairing) -> dict[str, str]:
    wanted = {call.tool_use_id for call in pairing.calls}
    found: dict[str, str] = {}
    for message in messages:
        for result in message.toolResults or ():
            if result.tool_use_id in wanted:
                found[result.tool_use_id] = result.text
    return found


def result_chars(messages: Sequence[SessionMessage]) -> int:
    return sum(len(r.text) for m in messages for r in m.toolResults or ())


# The baselines: fixed rules over the same prefix with the same pinned calls, so that a judge's
# figures are read against theirs on equal terms.


def rewritten(
    messages: Sequence[SessionMessage],
    drop: set[str],
    cut: Mapping[str, Callable[[str], str]] | None = None,
) -> list[SessionMessage]:
    cut = cut or {}
    out: list[SessionMessage] = []
    for message in messages:
        uses = tuple(u for u in message.toolUses if u.tool_use_id not in drop)
        results = tuple(
            ToolResult(tool_use_id=r.tool_use_id, text=cut[r.tool_use_id](r.text), isError=r.isError)
            if r.tool_use_id in cut
            else r
            for r in message.toolResults or ()
            if r.tool_use_id not in drop
        )
        if not message.text.strip() and not uses and not results:
            continue
        out.append(replace(message, toolUses=uses, toolResults=results or None))
    return out


def keep_everything(messages: Sequence[SessionMessage], pairing: Pairing) -> list[SessionMessage]:
    return list(messages)


def drop_everything(messages: Sequence[SessionMessage], pairing: Pairing) -> list[SessionMessage]:
    return rewritten(messages, {call.tool_use_id for call in pairing.candidates})


def cut_long_results(messages: Sequence[SessionMessage], pairing: Pairing) -> list[SessionMessage]:
    """Every unpinned result over 8,000 characters keeps its first 300 and a one-line note."""

    def head(text: str) -> str:
        return f"{text[:CUT_RULE_HEAD]}\n[{len(text) - CUT_RULE_HEAD} chars cut]"

    long = {c.tool_use_id: head for c in pairing.candidates if c.result_chars > CUT_RULE_CHARS}
    return rewritten(messages, set(), long)


BASELINES: dict[str, Callable[[Sequence[SessionMessage], Pairing], list[SessionMessage]]] = {
    f"cut results over {CUT_RULE_CHARS:,} chars": cut_long_results,
    "keep everything": keep_everything,
    "drop everything": drop_everything,
}


@dataclass
class Scores:
    """Ranking inputs for the labelled candidate calls of one fire point."""

    labels: list[bool] = field(default_factory=list)
    by_ranker: dict[str, list[float]] = field(default_factory=dict)

    def add(self, label: bool, scores: Mapping[str, float]) -> None:
        self.labels.append(label)
        for name, value in scores.items():
            self.by_ranker.setdefault(name, []).append(value)

    def extend(self, other: "Scores") -> None:
        self.labels.extend(other.labels)
        for name, values in other.by_ranker.items():
            self.by_ranker.setdefault(name, []).extend(values)
