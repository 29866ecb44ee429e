"""Fire points: where in a session the compaction is made to run."""

from __future__ import annotations

from typing import Sequence

from ..conversation.messages import SessionMessage

EVAL_FIRE_POINTS = (0.4, 0.6, 0.8)


def fire_index(total: int, fraction: float) -> int:
    """The first message left out when a session of ``total`` messages is cut at ``fraction``.

    At least one message is kept and at least one is left to look at.
    """
    if total < 2:
        raise ValueError("a fire point needs at least two messages")
    return max(1, min(total - 1, round(total * fraction)))


def prefix(messages: Sequence[SessionMessage], fraction: float) -> tuple[list[SessionMessage], int]:
    """The messages before the fire point, and the fire point's index."""
    fire = fire_index(len(messages), fraction)
    return list(messages[:fire]), fire
