"""Text helpers shared by the state builder, the rebuild and the stats.

Lengths here are Python code points. Upstream counts UTF-16 code units (JS ``.length``); the two
differ only for astral characters (emoji and the like), where upstream would count 2 and could
cut a surrogate pair in half. We count 1 and never split a character: a deliberate divergence.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .lazy_pattern import lazy_pattern

ELLIPSIS = "\u2026"
_LONE_SURROGATE = lazy_pattern("[\ud800-\udfff]")
_UNWRITABLE = lazy_pattern("[\ud800-\udfff\x00]")
# One encoder each, built once: json.dumps with options builds a new one per call, which costs
# more than encoding a short value.
_JS_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_PLAIN_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


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
        text = _JS_ENCODER.encode(value)
    except ValueError:  # a non-finite float: JavaScript prints null
        text = None
    # Only an integral float prints differently, and its Python form always holds ".0" or "e+":
    # without either, the walk that rewrites floats is not needed.
    if text is None or ((".0" in text or "e+" in text) and _needs_js_mapping(value)):
        text = _JS_ENCODER.encode(_js_value(value))
    if not text.isascii() and _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def plain_json(value: Any) -> str:
    """:func:`js_json` for values built of str, int, bool, None, lists and dicts only (no floats
    to re-print), such as state entries, whose inputs are already rendered: no pre-walk."""
    text = _PLAIN_ENCODER.encode(value)
    if not text.isascii() and _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def escape_unwritable(text: str) -> str:
    """Lone surrogates and NULs as ``\\udXXX`` / ``\\x00`` text, so any file or database takes it.

    A tool output cut mid-emoji arrives as a lone surrogate, which strict UTF-8 refuses to encode;
    a NUL ends a C string. Everything else is left as it is.
    """
    # An ASCII text without a NUL has neither (and most texts are): the pattern is not even compiled.
    if (text.isascii() and "\x00" not in text) or not _UNWRITABLE.search(text):
        return text
    return _UNWRITABLE.sub(lambda m: "\\x00" if m.group() == "\x00" else f"\\u{ord(m.group()):04x}", text)


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
