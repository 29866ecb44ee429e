"""The order of a message's blocks, kept only when the session file's writer would not give it back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..messages import BLOCK_LAYOUT, NO_EXTRA, SessionMessage

Layout = tuple[Any, ...]


def canonical_layout(role: str, text: str, extras: int, uses: int, results: int) -> Layout | None:
    """The blocks in the order a session file writes a message without ``BLOCK_LAYOUT``
    (session_file.py): None for a user message of text alone, written as a string."""
    if role == "assistant":
        return ("x",) * extras + ((len(text),) if text else ()) + ("u",) * uses or (0,)
    if not results and not extras:
        return None
    return ("r",) * results + ("x",) * extras + ((len(text),) if text else ())


def layout_of(message: SessionMessage) -> Layout | None:
    """The block order ``message`` was read in."""
    stored = message.extra.get(BLOCK_LAYOUT)
    if stored is not None:
        return tuple(stored)
    return canonical_layout(message.role, message.text, len(message.extra.get("extraBlocks") or ()),
                            len(message.toolUses), len(message.toolResults or ()))


def with_layout(message: SessionMessage, codes: Layout | None) -> SessionMessage:
    """``message`` holding ``codes`` when the writer's own order would not give them back."""
    wanted = canonical_layout(message.role, message.text, len(message.extra.get("extraBlocks") or ()),
                              len(message.toolUses), len(message.toolResults or ()))
    if codes == wanted or codes is None:  # None: a string content, which the writer writes as text
        if BLOCK_LAYOUT not in message.extra:
            return message
        return replace(message, extra={k: v for k, v in message.extra.items() if k != BLOCK_LAYOUT} or NO_EXTRA)
    # A list, as JSON gives it back: a message read again from `--format json` compares equal.
    return replace(message, extra={**message.extra, BLOCK_LAYOUT: list(codes)})
