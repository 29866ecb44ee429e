"""Redacted, one-line previews of tool inputs for the decision log.

The log outlives the session and may be shared in bug reports, so the input goes through the
one redactor (``fast_jev_compaction.redaction``) *before* the preview is cut to length (a secret
split by the cut would otherwise escape the patterns). Stdlib only: the hook imports this on its
hot path.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..redaction import redact_json, redact_text

__all__ = ["ELLIPSIS", "PREVIEW_LIMIT", "clip", "preview"]

PREVIEW_LIMIT = 160
ELLIPSIS = "…"

_WS = re.compile(r"\s+")


def _collapsed(value: Any) -> Any:
    """Every string of a JSON-like value on one line."""
    if isinstance(value, dict):
        return {str(key): _collapsed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_collapsed(item) for item in value]
    if isinstance(value, str):
        return _WS.sub(" ", value).strip()
    return value


def clip(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """Cut to ``limit`` characters, marking the cut with an ellipsis."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def preview(input: Any, limit: int = PREVIEW_LIMIT) -> str:  # noqa: A002 - the tool's "input"
    """Compact JSON of a tool input, secrets masked, whitespace collapsed, at most ``limit`` chars."""
    text = json.dumps(_collapsed(redact_json(input)), ensure_ascii=False, separators=(",", ":"), default=str)
    # A non-string leaf rendered through default=str could still carry a secret.
    return clip(_WS.sub(" ", redact_text(text)), limit)
