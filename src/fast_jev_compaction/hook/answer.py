"""The JSON document the hook answers the mod: replace, fallback or skip.

A replace answer is sized one message at a time, so a history too large to send is never built
as one text; past ``STDOUT_SOFT_LIMIT`` kept prompts go by handle and stored tool records are
left out, and past it again the messages go to a file the answer names (``answer_file``).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence, overload

from ..conversation.messages import SessionMessage
from ..conversation.stored import StoredJSON, json_pieces, piece_text
from ..redaction import redact_text
from ..textutil import js_json
from .outcome import Answer
from .turns import keeps_handle

# $.process.run caps stdout at 4 MiB; past this an answer refers to untouched messages by handle.
STDOUT_SOFT_LIMIT = 3 * 1024 * 1024


def fallback_answer(reason: str, log: Sequence[str] = ()) -> Answer:
    reason = redact_text(reason)  # it can quote an error body; the toast and the mod's log show it
    return {
        "action": "fallback",
        "reason": reason,
        "toast": f"fallback to built-in summary ({reason})",
        "log": list(log),
    }


def skip_answer(reason: str, log: Sequence[str] = ()) -> Answer:
    return {"action": "skip", "reason": reason, "log": list(log)}


def answer_text(answer: Answer) -> str:
    """The answer as one line of JSON that encodes as strict UTF-8 (lone surrogates escaped)."""
    return "".join(piece_text(piece) for piece in answer_pieces(answer))


def answer_pieces(answer: Answer) -> Iterator[str | StoredJSON]:
    """:func:`answer_text` in pieces, each message apart: the hook writes a large answer piece
    by piece, so its text is never whole (a megabyte of history as one string, copied to add the
    line end and again to encode it, was the hook's peak on a 1 MB session), and a stored record
    is made text only as it is written (``stored.piece_text``). ``JSON.stringify`` has no
    spaces, so the pieces join to the whole document's text."""
    yield "{"
    for count, (key, value) in enumerate(answer.items()):
        yield ("," if count else "") + js_json(key) + ":"
        if key == "messages" and isinstance(value, (list, WiredMessages)):
            yield "["
            for number, message in enumerate(value):
                if number:
                    yield ","
                yield from json_pieces(message)
            yield "]"
        else:
            yield js_json(value)
    yield "}"


def toast_text(stats: Any, how: str) -> str:
    """``12 of 40 tool outputs moved to the archive (9 cut to digests, 3 dropped), context 61% → 23%, no summary``."""
    unpinned = stats.calls - stats.pinned
    cut = stats.truncated + stats.dropped
    parts = [f"{stats.truncated} cut to digests"] if stats.truncated else []
    if stats.dropped:
        parts.append(f"{stats.dropped} dropped")
    if stats.evicted_turns:
        parts.append(f"{stats.evicted_turns} old turn(s) moved whole")
    if stats.evicted_parts:
        parts.append(f"{stats.evicted_parts} older part(s) of a turn moved")
    if stats.prompts_archived:
        parts.append(f"{stats.prompts_archived} old prompt(s) cut to their opening")
    if stats.prompts_folded:
        parts.append(f"the conversation before the turn in flight moved ({stats.prompts_folded} prompt(s))")
    if stats.command_output_cut:
        parts.append("the command output that ends it cut to a digest")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"{cut} of {unpinned} tool outputs moved to the archive{detail}, {how}, no summary"


def _without_bulk(block: dict[str, Any]) -> dict[str, Any]:
    # ``result`` is the tool's stored record (the model reads ``text``); a rebuilt block can do
    # without it when the answer must shrink to fit the host's stdout cap.
    return {k: v for k, v in block.items() if k != "result"}


class WiredMessages(Sequence[dict[str, Any]]):
    """The replace answer's messages, each wired (``SessionMessage.to_wire``) as it is read: the
    rebuilt history is held once, as its messages, and the answer is written a message at a time
    (:func:`answer_pieces`). A list of every wired message beside them was the hook's peak
    memory on a 1.6 MB session (some 1.3x the transcript)."""

    def __init__(self, out: Sequence[SessionMessage], compact: bool) -> None:
        self._out = out
        self._compact = compact

    def __len__(self) -> int:
        return len(self._out)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return list(wired(self._out[index], self._compact))
        return next(wired((self._out[index],), self._compact))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return wired(self._out, self._compact)


def wire_messages(out: Sequence[SessionMessage], *, compact: bool = False) -> WiredMessages:
    """The replace answer's messages; ``compact`` refers to kept prompts by handle, drops bulk."""
    return WiredMessages(out, compact)


def wired(out: Sequence[SessionMessage], compact: bool) -> Iterator[dict[str, Any]]:
    """Each message's wire form, a tool's stored record left as its text (``answer_pieces`` and
    ``answer_file.ascii_json`` write it in place)."""
    for message in out:
        if keeps_handle(message):
            yield {"handle": message.handle} if compact else message.to_wire(stored=True)
            continue
        data = message.to_wire(stored=True)
        data.pop("handle", None)
        if compact:
            data["toolUses"] = [_without_bulk(b) for b in data.get("toolUses", [])]
            if "toolResults" in data:
                data["toolResults"] = [_without_bulk(b) for b in data["toolResults"]]
        yield data


def answer_size(answer: Answer, messages: Iterable[dict[str, Any]], limit: int | None = None) -> int:
    """Bytes of ``answer_text`` of the answer with these messages, serialised one at a time;
    with a ``limit``, counting stops once the total is past it."""
    total = len(answer_text({**answer, "messages": []}).encode("utf-8"))
    for count, message in enumerate(messages):
        total += 1 if count else 0  # the comma between two
        # A stored record counts as its bytes, never made into text.
        total += sum(len(p.encode("utf-8")) if isinstance(p, str) else len(p.utf8) for p in json_pieces(message))
        if limit is not None and total > limit:
            break
    return total


def file_answer(answer: Answer, path: str, size: int) -> Answer:
    """The replace answer whose messages are the JSON array in the file at ``path`` (``size`` bytes)."""
    small = {k: v for k, v in answer.items() if k != "messages"}
    return {**small, "messagesFile": {"path": path, "bytes": size}}
