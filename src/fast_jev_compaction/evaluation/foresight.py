"""Foresight: what a policy that knew every later reuse would still lose in the same window.

The replay and the prefix fills count a reuse *gone* when neither its output nor every snippet it
repeats is in the context. How low that share can go depends on the sessions as much as on the
policy: when the outputs later turns quote outweigh the room under the target, some must leave.
A policy with foresight measures that part. At each pass it knows which outputs a later message
repeats and keeps those whole, smallest first (the most outputs the room holds), in what the
pipeline's aim (the target less its margin) leaves beside the user's last prompt; every other
output leaves, with no marker and no digest. Every text that is not an output (prompts, replies,
tool inputs) stays, for free: it takes no room, and a reuse whose snippets such a text or an
output still in view holds counts as kept, as the replay counts it; an output whose later
reuses those texts answer takes no room.

The free texts make it generous; the missing digests make it strict: a digest that happens to
hold the lines a later turn quotes beats it, but no policy can aim for those lines. Its figure
stands beside the pipeline's gone share, in the same window and under the same trigger rules (at
its own points): the distance between them is what better choices could still win, and what it
loses itself is the sessions' own, for a policy that cannot guess which lines of a cut output
will be quoted.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.sizes import message_chars
from ..decide.policy import CHARS_PER_TOKEN, TARGET_MARGIN_POINTS
from ..decide.turn_eviction import is_prompt, last_prompt_chars
from ..judge.reuse import string_values
from .labels import OutputLabel
from .outcome import snippets_of

# The page's definition, for the replay's table and the prefix fills' alike.
DEFINITION = (
    "*gone with foresight*: the reuses a policy that knows which outputs later messages repeat loses "
    "in the same window (`evaluation/foresight.py`: it keeps those whole, smallest first, in the room "
    "the pipeline's aim leaves beside the last prompt, drops every other output without a digest, and "
    "keeps every other text for free)"
)


def keep_smallest(sizes: Mapping[str, int], room: float) -> set[str]:
    """The most outputs of ``sizes`` (id -> characters) that fit in ``room``: smallest first."""
    kept: set[str] = set()
    for tool_use_id, size in sorted(sizes.items(), key=lambda item: item[1]):
        if size > room:
            break
        kept.add(tool_use_id)
        room -= size
    return kept


class Seen:
    """The snippets a context holds, counted per text: every text but the outputs (which
    foresight keeps for free), and the outputs while they are in it."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.own: dict[str, frozenset[str]] = {}  # every output's snippets, by id
        self.held: set[str] = set()  # the outputs in the context

    def add(self, message: SessionMessage) -> None:
        for text in [message.text, *(value for use in message.toolUses for value in string_values(use.input))]:
            if text:
                self.count.update(snippets_of(text))
        for result in message.toolResults or ():
            self.own[result.tool_use_id] = snippets_of(result.text)
            self.hold(result.tool_use_id)

    def hold(self, tool_use_id: str) -> None:
        """An output (already added) is in the context."""
        if tool_use_id not in self.held:
            self.held.add(tool_use_id)
            self.count.update(self.own[tool_use_id])

    def drop(self, tool_use_id: str) -> None:
        """An output leaves the context."""
        if tool_use_id in self.held:
            self.held.discard(tool_use_id)
            self.count.subtract(self.own[tool_use_id])

    def answered(self, tool_use_id: str, repeated: Iterable[str]) -> bool:
        """Whether every snippet of ``repeated`` is in the context outside the output's own text."""
        own = self.own.get(tool_use_id, frozenset()) if tool_use_id in self.held else frozenset()
        return all(self.count[snippet] > (snippet in own) for snippet in repeated)


def room(window_tokens: int, target_percent: float, overhead_tokens: float, prompt: int) -> float:
    """The characters a pass may keep beside the last prompt: the pipeline's aim, the target less
    its margin (``policy.chars_to_free``)."""
    return (window_tokens * (target_percent - TARGET_MARGIN_POINTS) / 100 - overhead_tokens) * CHARS_PER_TOKEN - prompt


def prefix_foresight(
    messages: Sequence[SessionMessage], labels: Mapping[str, OutputLabel], window_tokens: int, target_percent: float
) -> tuple[int, int]:
    """For a prefix ``messages`` compacted once in a window of ``window_tokens``: the outputs of
    it reused afterwards (``labels`` of the whole session), and how many of them foresight loses."""
    fire = len(messages)
    seen = Seen()
    for message in messages:
        seen.add(message)
    needed = {
        result.tool_use_id: len(result.text)
        for message in messages for result in message.toolResults or ()
        if result.tool_use_id in labels and labels[result.tool_use_id].needed_after(fire)
    }
    for tool_use_id in list(seen.own):
        seen.drop(tool_use_id)
    paid = {i: size for i, size in needed.items() if not seen.answered(i, labels[i].snippets_after(fire))}
    kept = keep_smallest(paid, room(window_tokens, target_percent, 0, last_prompt_chars(messages)))
    for tool_use_id in kept:
        seen.hold(tool_use_id)
    return len(needed), sum(not seen.answered(i, labels[i].snippets_after(fire)) for i in paid if i not in kept)


class ForesightContext:
    """Foresight's live context in a replay: fed the same messages, compacted at its own triggers."""

    def __init__(self, labels: Mapping[str, OutputLabel], window_tokens: int, target_percent: float, overhead_tokens: int = 0):
        self.labels = labels
        self.window_tokens = window_tokens
        self.target_percent = target_percent
        self.overhead_tokens = overhead_tokens
        self.outputs: dict[str, int] = {}  # the outputs in context, whole: id -> characters
        self.rest = 0  # every other character in context
        self.cut: set[str] = set()
        self.seen = Seen()
        self.prompt = 0  # the user's last prompt so far

    def percent(self) -> float:
        tokens = (self.rest + sum(self.outputs.values())) / CHARS_PER_TOKEN + self.overhead_tokens
        return 100.0 * tokens / self.window_tokens

    def gone(self, tool_use_id: str, repeated: Iterable[str]) -> bool:
        """Whether a reuse of ``tool_use_id`` repeating ``repeated`` finds it gone (just before
        the message making it joins the context)."""
        return tool_use_id in self.cut and not self.seen.answered(tool_use_id, repeated)

    def append(self, message: SessionMessage) -> None:
        if is_prompt(message):
            self.prompt = message_chars(message)
        results = {result.tool_use_id: len(result.text) for result in message.toolResults or ()}
        self.outputs.update(results)
        self.rest += message_chars(message) - sum(results.values())
        self.seen.add(message)

    def compact(self, index: int) -> bool:
        """A pass after message ``index``: the outputs a later message repeats stay as far as the
        room allows and every other output leaves; the texts stay in view, taking no room but the
        last prompt's. True: the pass always replaces the context (it frees what it must for
        nothing)."""
        for tool_use_id in self.outputs:
            self.seen.drop(tool_use_id)
        needed = {}
        for tool_use_id, size in self.outputs.items():
            label = self.labels.get(tool_use_id)
            later = label.snippets_after(index + 1) if label is not None else set()
            if later and not self.seen.answered(tool_use_id, later):
                needed[tool_use_id] = size
        kept = keep_smallest(needed, room(self.window_tokens, self.target_percent, self.overhead_tokens, self.prompt))
        self.cut.update(i for i in self.outputs if i not in kept)
        for tool_use_id in kept:
            self.seen.hold(tool_use_id)
        self.outputs = {i: self.outputs[i] for i in kept}
        self.rest = self.prompt
        return True
