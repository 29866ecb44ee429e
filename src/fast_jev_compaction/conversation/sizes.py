"""How many characters a message and a tool input take: the one measure of a context's size.

Every step that weighs the context (the budget, the rebuild, the gate, the evaluation) counts
with these, as the upstream estimator counts the JSON it is given (upstream §6.5).
"""

from __future__ import annotations

from array import array
from json.encoder import encode_basestring
from typing import Sequence

from ..textutil import JSON_SHORT_ESCAPES, js_json
from .messages import SessionMessage
from .pairing import ToolCall

# The bytes JSON writes as they are (``js_json``: raw UTF-8): all but those below 0x20 and the
# others it escapes.
_AS_THEY_ARE = bytes(byte for byte in range(256) if byte >= 0x20 and byte not in JSON_SHORT_ESCAPES)
# From this length a text's escapes are counted, not written: the encoder's escape costs tens of
# instructions a character, counting them a few.
_COUNTED_TEXT = 256


def input_chars(value: object) -> int:
    """``len(js_json(value))``, or 20 for an input JSON cannot write.

    A dict's texts, numbers and flags (most inputs hold nothing else) are measured one by one
    and its lists and dicts rendered: rendering the whole input made one encoder pass per input
    and wrote every long text (a written file, an edit's strings) only to measure it.
    """
    try:
        if type(value) is not dict:
            return len(js_json(value))
        # The braces, and a colon per item and a comma between two.
        size = 2 * len(value) + 1 if value else 2
        for key, item in value.items():
            if type(key) is not str:
                return len(js_json(value))
            size += _text_chars(key)
            kind = type(item)
            if kind is str:
                size += _text_chars(item)
            elif kind is bool:
                size += 4 if item else 5
            elif kind is int:
                size += len(repr(item))
            elif item is None:
                size += 4
            else:  # floats (JavaScript's forms), lists, dicts
                size += len(js_json(item))
        return size
    except (TypeError, ValueError):
        return 20


def _text_chars(text: str) -> int:
    """``len(js_json(text))``."""
    if len(text) < _COUNTED_TEXT and text.isascii():
        return len(encode_basestring(text))
    try:
        escaped = text.encode("utf-8").translate(None, _AS_THEY_ARE)
    except UnicodeEncodeError:  # a lone surrogate, which js_json writes as an escape
        return len(js_json(text))
    return len(text) + 2 + len(escaped) + 4 * len(escaped.translate(None, JSON_SHORT_ESCAPES))


def message_chars(message: SessionMessage, input_sizes: array[int] | None = None) -> int:
    """Text, tool inputs and result texts; the ToolUse copy of a result is not counted twice.
    With ``input_sizes``, each tool input's size is appended to it on the way."""
    # Plain loops: most messages hold one block or none, where generators cost more than the sum.
    size = len(message.text)
    for use in message.toolUses:
        chars = input_chars(use.input)
        size += chars
        if input_sizes is not None:
            input_sizes.append(chars)
    for result in message.toolResults or ():
        size += len(result.text)
    return size


def measured(messages: Sequence[SessionMessage], calls: Sequence[ToolCall]) -> tuple[array[int], array[int]]:
    """:func:`message_chars` of each message, and :func:`input_chars` of each call's input, by
    position (8 bytes each), each input measured once: ``calls`` are pairing's, the uses that
    have their result, in the order of the uses."""
    inputs = array("q")
    sizes = array("q", [message_chars(message, inputs) for message in messages])
    if len(inputs) == len(calls):  # no use waits for its result
        return sizes, inputs
    completed = {call.tool_use_id for call in calls}
    uses = (use for message in messages for use in message.toolUses)
    return sizes, array("q", [size for size, use in zip(inputs, uses) if use.tool_use_id in completed])
