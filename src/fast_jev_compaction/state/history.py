"""Render messages as Jev history entries (upstream §3.3), structured or as one-liners (§4.3)."""

from __future__ import annotations

import re
from itertools import filterfalse
from typing import Any, Iterator, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, PendingCall, ToolCall
from ..redaction import redact_text
from ..textutil import collapse_spaces, js_json, plain_json, truncate
from .tokens import json_tally, tally

UNSERIALIZABLE = "[unserializable input]"


def input_json(value: dict[str, Any], limit: int, memo: RenderMemo | None = None) -> str:
    try:
        if memo is not None and limit <= _INPUT_CUT:
            return truncate(memo.json(value), limit)
        return truncate(js_json(value), limit)
    except (TypeError, ValueError):
        return UNSERIALIZABLE


# The longest cut of an input that states show (the largest input stage).
_INPUT_CUT = 1000


def _cut_input(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with each top-level text longer than ``_INPUT_CUT`` cut to that length.

    JSON escapes each character on its own into one or more, so the cut text's JSON opens as the
    whole text's does for at least ``_INPUT_CUT`` characters, and so does the input's (a cut
    input is longer than that either way): every ``truncate`` up to that length is the same,
    without rendering a written file's whole content.
    """
    # A plain loop: most inputs hold two or three short values, where a generator costs more.
    for item in value.values():
        if type(item) is str and len(item) > _INPUT_CUT:
            return {key: item[:_INPUT_CUT] if type(item) is str else item for key, item in value.items()}
    return value


def result_note(call: ToolCall) -> str:
    return f"{'error' if call.is_error else 'ok'}, {call.result_chars} chars (omitted)"


# How much of each output the state shows, per input stage: the judge reads content too, and a
# digest shrinks with the inputs when the state has to.
DIGEST_CHARS = {1000: 300, 200: 100}
# A name of 7 or more characters: a letter or "_", word characters, dots, dashes or slashes, and
# a word character last. The lookbehind spares the attempts that start inside a word: a match
# never does, since the attempt at the word's first letter reached as far (tests/test_speed_equivalence.py
# checks the plain pattern ``[A-Za-z_][\w.\-/]{5,}[\w]`` finds the same).
_TERM = re.compile(r"[A-Za-z_](?<![A-Za-z_][A-Za-z_])[\w.\-/]{5,}\w")
_TERMS = 8
# A digest's terms are counted over this opening of its output. 2,000 rather than 10,000 (itself
# down from 50,000): the term scan costs per character; the corpus outputs it reads shrink from
# 705k to 345k characters and the digests of a core pass from 136M to 80M instructions. In
# `fast-jev eval --frontier --serve` the state judge's held-out AUC went from 0.876 to 0.875
# (in sample 0.918 to 0.917, windowed 0.871 to 0.870, weights.json over the state 0.885 to
# 0.888) and no other figure moved; 1,000 cut 20M more, held out 0.875 too, in sample 0.915.
TERM_SCAN_CHARS = 2_000
_TERM_MIN = 7
# ASCII bytes that may be in a term: word characters, ".", "-" and "/"; every other ASCII byte
# is a space, and non-ASCII bytes stay as they are (see _term_counts).
_RUN_BYTES = bytes(b if b >= 0x80 or chr(b).isalnum() or chr(b) in "_.-/" else 0x20 for b in range(256))
_TERM_LEAD = b"0123456789.-/"  # what a run may open with before a term starts
_TERM_TRAIL = b".-/"  # what it may close with after a term ends
# The flattened characters a digest keeps of each end of a long output: as many as the longest
# digest shows (output_digest flattens the whole output for a longer one).
_FLAT_ENDS = max(DIGEST_CHARS.values())


def output_digest(text: str, budget: int, memo: RenderMemo | None = None) -> str:
    """A one-line glimpse of an output: its opening and closing, and its most repeated terms.

    Every piece is redacted (``redaction.redact_text``) before it is cut: a term, or an end cut
    mid-line, no longer holds the name, flag or ``user:`` that marks a password as one, so the
    state's own redaction would let it through.
    """
    flat, exact, terms = memo.parts(text) if memo is not None else _parts(text)
    if not exact and budget > _FLAT_ENDS:
        flat = _flat(redact_text(text).splitlines())
    if len(flat) > budget:
        head = max(0, budget * 3 // 5)
        flat = f"{flat[:head]} … {flat[len(flat) - (budget - head):]}"
    return f"{flat} [terms: {terms}]" if terms else flat


def read_digest(digest: str) -> tuple[list[str], list[str]]:
    """A digest's lines (the cut between its ends stays inside a line) and its terms: what a
    judge that reads states has of an output (tests/test_state.py checks it against
    :func:`output_digest`)."""
    flat, terms = digest, ""
    if digest.endswith("]"):
        head, found, tail = digest.rpartition(" [terms: ")
        if found:
            flat, terms = head, tail[:-1]
    lines = [line for line in flat.split(" ⏎ ") if line]
    return lines, terms.split()


def _parts(text: str) -> tuple[str, bool, str]:
    """The flattened lines (exact, or of a long output only both ends), and the term list."""
    flat, exact = _flattened(text)
    return flat, exact, _top_terms(_term_counts(redact_text(text[:TERM_SCAN_CHARS])))


def _term_counts(text: str) -> dict[bytes, int]:
    """How often each ``_TERM`` match occurs in ``text``, keyed by its UTF-8 bytes, but for plain
    words that are runs of their own (below), beside a few keys shorter than ``_TERM_MIN`` bytes
    that are not matches (:func:`_top_terms` skips both).

    A match lies in a run of word characters, dots, dashes and slashes: it starts at the run's
    first ASCII letter or "_" and ends at its last word character, and is one if that spans
    7 or more characters. The runs are cut in C (every ASCII byte that cannot be in a term a
    space, non-ASCII bytes kept whole in their runs) and only the long ones stripped and
    counted; the few stripped ones left too short stay, as dropping them would read every key.
    A run of ASCII letters only, all lower case or title case, is a plain word, its own match and
    never a term (see _is_term): it is left out before it is stripped or counted (half the long
    runs on the corpus). A run with non-ASCII characters in it, which may split it or count wider in bytes,
    is matched by ``_TERM`` itself. The Read tool's line-number arrow "→" cannot be in a term,
    so it is a space before the cut: on the corpus that leaves half the non-ASCII outputs all
    ASCII. On the corpus outputs this takes under 3/4 of the instructions of ``findall``
    (tests/test_speed_equivalence.py checks the two agree on the terms).
    """
    if not text.isascii():
        text = text.replace("\u2192", " ")
    encoded = text.encode("utf-8", "surrogatepass")
    # The constants as locals: the loop reads them once a run. A plain dict: a Counter's
    # construction costs more than counting a short output's runs.
    least, lead, trail = _TERM_MIN, _TERM_LEAD, _TERM_TRAIL
    counts: dict[bytes, int] = {}
    for run in encoded.translate(_RUN_BYTES).split():
        if len(run) >= least and not (run.isalpha() and (run.islower() or run.istitle())):
            term = run.lstrip(lead).rstrip(trail)
            counts[term] = counts.get(term, 0) + 1
    if len(encoded) == len(text):  # all ASCII
        return counts
    for run in list(filterfalse(bytes.isascii, counts)):
        times = counts.pop(run)
        for match in _TERM.findall(run.decode("utf-8", "surrogatepass")):
            term = match.encode("utf-8", "surrogatepass")
            counts[term] = counts.get(term, 0) + times
    return counts


def _top_terms(counts: dict[bytes, int]) -> str:
    """The ``_TERMS`` most repeated terms of :func:`_term_counts`, ties alphabetical (UTF-8 bytes
    sort as their code points do), joined by spaces: words are tested in that order only until
    enough are found, not all of them."""
    # Sorting by count after sorting by word keeps ties in word order.
    words = sorted(counts)
    words.sort(key=counts.__getitem__, reverse=True)
    chosen: list[bytes] = []
    for word in words:
        if len(word) < _TERM_MIN:
            continue
        if word.isascii():
            # Letters only, all lower case or title case, is no term (see _is_term): the few
            # such words left are those that only stripping a run made.
            term = not (word.isalpha() and (word.islower() or word.istitle()))
        else:
            term = _is_term(word.decode("utf-8", "surrogatepass"))
        if term:
            chosen.append(word)
            if len(chosen) == _TERMS:
                break
    return b" ".join(chosen).decode("utf-8", "surrogatepass")


def _flat(lines: list[str]) -> str:
    return " ⏎ ".join(filter(None, map(str.strip, lines)))


def _flattened(text: str) -> tuple[str, bool]:
    """The flattened lines; for a long output, ``_FLAT_ENDS`` characters of each end, which is
    all a digest of up to that many characters reads, without flattening the middle."""
    # Shorter outputs are flattened whole: from 600 or 900 characters up, the ends cost more.
    if len(text) > 4 * _FLAT_ENDS:
        ends = _flat_ends(text)
        if ends is not None:
            return ends, False
    return _flat(redact_text(text).splitlines()), True


def _masked_flat(raw: str, flat: str) -> str:
    """``flat``, the flattened lines of ``raw``, from ``raw`` redacted (as a whole, in context)."""
    masked = redact_text(raw)
    return flat if masked == raw else _flat(masked.splitlines())


def _flat_ends(text: str) -> str | None:
    """``_FLAT_ENDS`` flattened characters of each end of ``text``, or None when whole lines
    that do not overlap cannot give them.

    Each end takes whole lines (cut at a newline: any line break before it splits the text as
    it does the whole) from the outside in, only as many more as the characters it still lacks
    could fill: on the corpus the 151 long outputs of a pass read 139k characters this way, 215k
    through a fixed 600 at each end, which fell short (then the whole output) for 24 of them.
    Flattening more lines only adds to each end.
    """
    head, end = "", -1  # the head is flattened from the lines before text[end]
    while len(head) < _FLAT_ENDS:
        start = end + 1
        end = text.find("\n", start + _FLAT_ENDS - len(head))
        if end < 0:
            return None
        head = _flat([head, *text[start:end].splitlines()])
    tail, start = "", len(text)  # the tail is flattened from the lines after text[start]
    while len(tail) < _FLAT_ENDS:
        stop = start
        # The head's "\n" may end the tail too: the lines are still apart.
        start = text.rfind("\n", end, stop - (_FLAT_ENDS - len(tail)))
        if start < 0:
            return None
        tail = _flat([*text[start + 1 : stop].splitlines(), tail])
    # Each end redacted from its whole lines, before the cut to length.
    return _masked_flat(text[:end], head)[:_FLAT_ENDS] + _masked_flat(text[start + 1 :], tail)[-_FLAT_ENDS:]


def _is_term(word: str) -> bool:
    # A path, a dotted or snake_case name, a number-bearing token or a camelCase identifier.
    return any(c.isdigit() or c in "_./-" for c in word) or any(c.isupper() for c in word[1:])


class RenderMemo:
    """What the states of one compaction (stages, windows) show, rendered once: each input's
    JSON, each output's flattened text and terms, each call's structured form per input length
    and its one-liner, and the token tally (tokens.tally) of each rendered piece.

    A memo serves one list of messages and its pairing: calls are known by their ids.
    """

    def __init__(self) -> None:
        self._parts: dict[int, tuple[str, tuple[str, bool, str]]] = {}
        self._json: dict[int, tuple[dict[str, Any], str]] = {}
        self._calls: dict[tuple[str, int], dict[str, Any]] = {}
        self._pending: dict[tuple[str, int], dict[str, Any]] = {}
        self._one_lines: dict[str, str] = {}
        self._tallies: dict[int, tuple[object, tuple[int, int]]] = {}
        self._grouped: tuple[Pairing, tuple[dict[int, list[ToolCall]], dict[int, list[PendingCall]]]] | None = None
        self._outputs: tuple[Sequence[SessionMessage], dict[str, str]] | None = None

    def json(self, value: dict[str, Any]) -> str:
        """The JSON of ``value``, good for any cut up to ``_INPUT_CUT`` (see :func:`_cut_input`)."""
        found = self._json.get(id(value))
        if found is None or found[0] is not value:
            found = (value, js_json(_cut_input(value)))
            self._json[id(value)] = found
        return found[1]

    def parts(self, text: str) -> tuple[str, bool, str]:
        # Keyed by identity (the same output object across stages); the text is held so the id
        # stays valid while the memo lives.
        found = self._parts.get(id(text))
        if found is None or found[0] is not text:
            found = (text, _parts(text))
            self._parts[id(text)] = found
        return found[1]

    def has_read(self, text: str) -> bool:
        """Whether :meth:`parts` has read ``text`` already."""
        found = self._parts.get(id(text))
        return found is not None and found[0] is text

    def call(self, call: ToolCall, input_chars: int, output: str | None) -> dict[str, Any]:
        """:func:`structured_call`, the same object each time: states share it, none changes it."""
        key = (call.id, input_chars)
        found = self._calls.get(key)
        if found is None:
            found = self._calls[key] = structured_call(call, input_chars, output, self)
        return found

    def pending(self, call: PendingCall, input_chars: int) -> dict[str, Any]:
        key = (call.tool_use_id, input_chars)
        found = self._pending.get(key)
        if found is None:
            found = self._pending[key] = pending_call(call, input_chars, self)
        return found

    def one_line(self, call: ToolCall) -> str:
        found = self._one_lines.get(call.id)
        if found is None:
            found = self._one_lines[call.id] = one_line_call(call)
        return found

    def tally(self, value: str | dict[str, Any]) -> tuple[int, int]:
        """``tokens.tally(plain_json(value))``, kept by identity (the value is held so its id
        stays valid while the memo lives)."""
        found = self._tallies.get(id(value))
        if found is None or found[0] is not value:
            found = (value, json_tally(value) if isinstance(value, str) else _dict_tally(value))
            self._tallies[id(value)] = found
        return found[1]

    def by_message(self, pairing: Pairing) -> tuple[dict[int, list[ToolCall]], dict[int, list[PendingCall]]]:
        """:func:`calls_by_message`, grouped once."""
        if self._grouped is None or self._grouped[0] is not pairing:
            self._grouped = (pairing, calls_by_message(pairing))
        return self._grouped[1]

    def outputs(self, messages: Sequence[SessionMessage]) -> dict[str, str]:
        """Each output's text by tool_use_id."""
        if self._outputs is None or self._outputs[0] is not messages:
            self._outputs = (messages, {r.tool_use_id: r.text for m in messages for r in m.toolResults or ()})
        return self._outputs[1]


def _dict_tally(value: dict[str, Any]) -> tuple[int, int]:
    """``tally(plain_json(value))`` of a dict of texts (a rendered call) from its keys' and
    texts' tallies: its JSON joins their JSON by punctuation, which splits no run of letters or
    digits (tokens.tally). Another dict is written and tallied."""
    if not value:
        return tally("{}")
    # The keys, and the texts, each tallied joined by quotes in one go (a text's count costs
    # more than its letters): an escaped quote between two texts is the two 0.9 pieces of
    # their own quotes (tokens.json_tally), and the keys, always the same few, are kept.
    try:
        key_tenths, key_others = json_tally('"'.join(value))
        item_tenths, item_others = json_tally('"'.join(value.values()))
    except TypeError:  # a key or a value that is not a text
        return tally(plain_json(value))
    # The braces, a colon per item and a comma between two.
    others = 2 * len(value) + 1
    return 9 * others + key_tenths + item_tenths, others + key_others + item_others


def structured_call(call: ToolCall, input_chars: int, output: str | None = None, memo: RenderMemo | None = None) -> dict[str, Any]:
    entry = {"id": call.id, "tool": call.tool, "input": input_json(call.input, input_chars, memo), "result": result_note(call)}
    budget = DIGEST_CHARS.get(input_chars, 0)
    if output and budget:
        entry["digest"] = output_digest(output, budget, memo)
    return entry


def pending_call(call: PendingCall, input_chars: int, memo: RenderMemo | None = None) -> dict[str, Any]:
    return {"tool_use_id": call.tool_use_id, "tool": call.tool, "input": input_json(call.input, input_chars, memo)}


def one_line_input(value: dict[str, Any]) -> str:
    """``key=value`` pairs, at most 60 characters.

    Upstream rendered a non-string value as the JSON of ``{key: value}``, which printed the key
    twice (``limit={"limit":100}``, §9.5); we print ``limit=100``.
    """
    # The opening of the pairs with each text cut at _ONE_LINE_PEEK is the opening of the whole
    # pairs, and with its spaces collapsed the opening of the whole line: once that is longer
    # than the cut, the rest cannot show (a file written whole is not copied whole).
    pairs = _pairs(value, _ONE_LINE_PEEK)
    line = collapse_spaces(pairs[:_ONE_LINE_PEEK])
    if len(line) <= 60 and len(pairs) > _ONE_LINE_PEEK:
        line = collapse_spaces(_pairs(value, None))
    return truncate(line, 60)


_ONE_LINE_PEEK = 256


def _pairs(value: dict[str, Any], peek: int | None) -> str:
    parts = []
    for key, item in value.items():
        if isinstance(item, str):
            parts.append(f"{key}={item[:peek]}")
        else:
            try:
                parts.append(f"{key}={truncate(js_json(item), 200)}")
            except (TypeError, ValueError):
                parts.append(f"{key}={UNSERIALIZABLE}")
    return " ".join(parts)


def one_line_call(call: ToolCall) -> str:
    status = "error" if call.is_error else "ok"
    return f"{call.id} {call.tool} {one_line_input(call.input)} → {status} {call.result_chars}ch"


def one_line_most_chars(call: ToolCall) -> int:
    """The most characters :func:`one_line_call` can take, without rendering it: the input's
    pairs are cut to 60 characters and the status is "ok" or "error"."""
    return len(call.id) + len(call.tool) + len(str(call.result_chars)) + 60 + len("error") + 8  # 5 spaces, →, ch


def calls_by_message(pairing: Pairing) -> tuple[dict[int, list[ToolCall]], dict[int, list[PendingCall]]]:
    completed: dict[int, list[ToolCall]] = {}
    for call in pairing.calls:
        completed.setdefault(call.call_index, []).append(call)
    pending: dict[int, list[PendingCall]] = {}
    for waiting in pairing.pending:
        pending.setdefault(waiting.call_index, []).append(waiting)
    return completed, pending


def history_entries(
    messages: Sequence[SessionMessage], pairing: Pairing, input_chars: int, memo: RenderMemo | None = None
) -> list[dict[str, Any]]:
    """One entry per message that has text, completed calls or pending calls.

    Results are represented by the note (and digest) on their call, so result-only messages do
    not appear.
    """
    if memo is None:
        memo = RenderMemo()
    outputs = memo.outputs(messages)
    return [history_entry(*shown, input_chars, outputs, memo) for shown in shown_messages(messages, pairing, memo)]


def shown_messages(
    messages: Sequence[SessionMessage], pairing: Pairing, memo: RenderMemo
) -> Iterator[tuple[int, SessionMessage, list[ToolCall] | None, list[PendingCall] | None]]:
    """The messages a history shows, in order, each with its completed and its pending calls:
    those with text or calls (see :func:`history_entries`)."""
    completed, pending = memo.by_message(pairing)
    for index, message in enumerate(messages):
        calls = completed.get(index)
        waiting = pending.get(index)
        if calls or waiting or message.text.strip():
            yield index, message, calls, waiting


def history_entry(
    index: int,
    message: SessionMessage,
    calls: list[ToolCall] | None,
    waiting: list[PendingCall] | None,
    input_chars: int,
    outputs: dict[str, str],
    memo: RenderMemo,
) -> dict[str, Any]:
    """The entry of one message (see :func:`history_entries`)."""
    entry: dict[str, Any] = {"i": index, "role": message.role, "text": message.text}
    if calls:
        entry["tool_calls"] = [memo.call(call, input_chars, outputs.get(call.tool_use_id)) for call in calls]
    if waiting:
        entry["pending_calls"] = [memo.pending(call, input_chars) for call in waiting]
    return entry
