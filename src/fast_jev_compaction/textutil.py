"""Text helpers shared by the state builder, the rebuild and the stats.

Lengths here are Python code points. Upstream counts UTF-16 code units (JS ``.length``); the two
differ only for astral characters (emoji and the like), where upstream would count 2 and could
cut a surrogate pair in half. We count 1 and never split a character: a deliberate divergence.
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Callable

ELLIPSIS = "\u2026"
# The bytes a JSON string writes with a backslash and one character (``\n``, ``\"``); the other
# bytes below 0x20 take six (``\u001b``), and every other byte is written as it is.
JSON_SHORT_ESCAPES = b'"\\\b\f\n\r\t'
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_UNWRITABLE = re.compile("[\ud800-\udfff\x00]")
# C0 controls but line feed and tab, DEL, and C1 controls (the 8-bit CSI among them).
_TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# One encoder each, built once: json.dumps with options builds a new one per call, which costs
# more than encoding a short value, and so does JSONEncoder.encode (a closure, a C encoder and a
# dict of the containers it is in, per value). Values here come from parsed JSON or are built by
# us, never circular, so the C encoder runs without that dict.
_JS_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_PLAIN_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def c_encoder(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` through one C encoder made once (the plain method where there is none)."""
    if c_make_encoder is None:  # pragma: no cover - CPython always has the accelerator
        return encoder.encode
    chunks = c_make_encoder(
        None, encoder.default, encode_basestring, None, encoder.key_separator, encoder.item_separator,
        encoder.sort_keys, encoder.skipkeys, encoder.allow_nan,
    )

    def encode(value: Any) -> str:
        if type(value) is str:
            return encode_basestring(value)
        return "".join(chunks(value, 0))

    return encode


_js_encode = c_encoder(_JS_ENCODER)
_plain_encode = c_encoder(_PLAIN_ENCODER)


def _js_value(value: Any) -> Any:
    """Map Python values onto what ``JSON.stringify`` would print."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 1e21 else value
    if isinstance(value, dict):
        return {str(k): _js_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_js_value(v) for v in value]
    return value


def _needs_js_mapping(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_needs_js_mapping(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_needs_js_mapping(v) for v in value)
    return False


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``: no spaces, raw UTF-8, lone surrogates escaped, ``1.0`` as ``1``."""
    try:
        text = _js_encode(value)
    except ValueError:  # a non-finite float: JavaScript prints null
        text = None
    # Only an integral float prints differently, and its Python form always holds ".0" or "e+":
    # without either, the walk that rewrites floats is not needed. Most texts hold no "+", found
    # by memchr in a fraction of a search for "e+".
    if text is None or ((".0" in text or ("+" in text and "e+" in text)) and _needs_js_mapping(value)):
        text = _js_encode(_js_value(value))
    if not text.isascii() and has_lone_surrogate(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def plain_json(value: Any) -> str:
    """:func:`js_json` for values built of str, int, bool, None, lists and dicts only (no floats
    to re-print), such as state entries, whose inputs are already rendered: no pre-walk."""
    text = _plain_encode(value)
    if not text.isascii() and has_lone_surrogate(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate: the one thing strict UTF-8 cannot encode, and
    its encoder finds it in a third of the instructions of a regex search."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def collapse_spaces(text: str) -> str:
    """``re.sub(r"\\s+", " ", text)``: each run of whitespace one space (split and joined in C)."""
    inner = " ".join(text.split())
    if not inner:
        return " " if text else ""
    return f"{' ' if text[0].isspace() else ''}{inner}{' ' if text[-1].isspace() else ''}"


def escape_unwritable(text: str) -> str:
    """Lone surrogates and NULs as ``\\udXXX`` / ``\\x00`` text, so any file or database takes it.

    A tool output cut mid-emoji arrives as a lone surrogate, which strict UTF-8 refuses to encode;
    a NUL ends a C string. Everything else is left as it is.
    """
    # An ASCII text without a NUL has neither (and most texts are): no search is needed.
    if (text.isascii() and "\x00" not in text) or not _UNWRITABLE.search(text):
        return text
    return _UNWRITABLE.sub(lambda m: "\\x00" if m.group() == "\x00" else f"\\u{ord(m.group()):04x}", text)


def terminal_safe(text: str) -> str:
    r"""Control characters as ``\u00XX`` text, so a printed value (a session id, a tool name read
    from a decision log anyone's session wrote) cannot move the cursor, clear or retitle the
    terminal. The escape is also a valid JSON escape, so a JSON document stays valid."""
    if text.isprintable() or not _TERMINAL_CONTROL.search(text):
        return text
    return _TERMINAL_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def truncate(text: str, limit: int) -> str:
    """At most ``limit`` characters; a cut text ends in ``…`` and is exactly ``limit`` long."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS


def abridge(text: str, head: int = 400, tail: int = 150) -> str:
    """Keep the head and the tail of a long text with a count of what was left out."""
    if len(text) <= head + tail + 40:
        return text
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[{ELLIPSIS} {omitted} chars omitted {ELLIPSIS}]\n{text[len(text) - tail:]}"


def collapsed(length: int) -> str:
    """What a whole collapsed message text becomes in the state."""
    return f"[{ELLIPSIS} {length} chars omitted {ELLIPSIS}]"


def format_number(value: float) -> str:
    """A number as JavaScript prints it in a template string (``25000``, not ``25000.0``)."""
    return str(int(value)) if float(value).is_integer() else str(value)
