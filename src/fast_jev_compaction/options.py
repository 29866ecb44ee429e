"""Compaction options and their resolution rules (upstream §6.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DEFAULT_KEEP_THRESHOLD = 0.5
DEFAULT_PRESERVE_RECENT_MESSAGES = 6
DEFAULT_MAX_STATE_TOKENS = 25_000
# Kept under Jev's 32k-token context.
DEFAULT_MAX_REQUEST_TOKENS = 30_000
# A truncated output keeps a digest: its opening, its closing and its key lines. Head 500 plus
# tail 500 holds about 80 % of what real sessions reuse from a cut output (head 300 alone: ~50 %).
DEFAULT_TRUNCATE_HEAD_CHARS = 500
DEFAULT_DIGEST_CHARS = 1600
DEFAULT_MAX_CONCURRENT_REQUESTS = 4
# The budget policy: cut the least valuable judged outputs until this share of the candidates'
# output is freed, never one whose keep_result reaches the floor.
DEFAULT_TARGET_REDUCTION = 0.7
DEFAULT_KEEP_FLOOR = 0.8
POLICIES = ("budget", "threshold")


@dataclass(frozen=True)
class CompactOptions:
    """Resolved options; build them with :func:`resolve_options` to apply the rules."""

    goal: str = ""
    keep_threshold: float = DEFAULT_KEEP_THRESHOLD
    preserve_recent_messages: int = DEFAULT_PRESERVE_RECENT_MESSAGES
    max_state_tokens: float = DEFAULT_MAX_STATE_TOKENS
    max_request_tokens: float = DEFAULT_MAX_REQUEST_TOKENS
    truncate_head_chars: int = DEFAULT_TRUNCATE_HEAD_CHARS
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS
    digest_chars: int = DEFAULT_DIGEST_CHARS
    policy: str = "budget"
    target_reduction: float = DEFAULT_TARGET_REDUCTION
    keep_floor: float = DEFAULT_KEEP_FLOOR
    # Where cut outputs are saved (content-addressed); None: nothing is saved.
    archive_dir: str | None = None
    # The deterministic rules (rules.py) settle what they can before the judge is asked.
    use_rules: bool = True


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def validate_threshold(value: float) -> float:
    """Thresholds live in [0, 1]; anything else is a caller error, not a silent clamp."""
    if not 0 <= value <= 1:
        raise ValueError("keepThreshold must be between 0 and 1")
    return value


def resolve_options(
    *,
    goal: str | None = None,
    keep_threshold: Any = None,
    preserve_recent_messages: Any = None,
    max_state_tokens: Any = None,
    max_request_tokens: Any = None,
    truncate_head_chars: Any = None,
    max_concurrent_requests: Any = None,
    digest_chars: Any = None,
    policy: str | None = None,
    target_reduction: Any = None,
    keep_floor: Any = None,
    archive_dir: str | None = None,
    use_rules: bool = True,
) -> CompactOptions:
    """Apply upstream's rules: non-finite values fall back, counts are floored and clamped."""
    threshold = _finite(keep_threshold)
    threshold = DEFAULT_KEEP_THRESHOLD if threshold is None else validate_threshold(threshold)

    def floored(value: Any, default: int, minimum: int) -> int:
        number = _finite(value)
        return default if number is None else max(minimum, math.floor(number))

    def at_least_one(value: Any, default: float) -> float:
        number = _finite(value)
        return default if number is None else max(1.0, number)

    return CompactOptions(
        goal=goal or "",
        keep_threshold=threshold,
        preserve_recent_messages=floored(preserve_recent_messages, DEFAULT_PRESERVE_RECENT_MESSAGES, 0),
        max_state_tokens=at_least_one(max_state_tokens, DEFAULT_MAX_STATE_TOKENS),
        max_request_tokens=at_least_one(max_request_tokens, DEFAULT_MAX_REQUEST_TOKENS),
        truncate_head_chars=floored(truncate_head_chars, DEFAULT_TRUNCATE_HEAD_CHARS, 0),
        max_concurrent_requests=floored(max_concurrent_requests, DEFAULT_MAX_CONCURRENT_REQUESTS, 1),
        digest_chars=floored(digest_chars, DEFAULT_DIGEST_CHARS, 0),
        policy=policy if policy in POLICIES else "budget",
        target_reduction=_share(target_reduction, DEFAULT_TARGET_REDUCTION),
        keep_floor=_share(keep_floor, DEFAULT_KEEP_FLOOR),
        archive_dir=archive_dir or None,
        use_rules=bool(use_rules),
    )


def _share(value: Any, default: float) -> float:
    number = _finite(value)
    if number is None:
        return default
    if not 0 <= number <= 1:
        raise ValueError("a share must be between 0 and 1")
    return number
