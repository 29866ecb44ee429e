"""Plugin options -> hook configuration, with upstream's defaults (upstream §7.1).

The mod passes the ``userConfig`` values it was registered with. Values can be missing (an option
at its default may be absent), or of the wrong type (a hand-edited settings file); either way the
default applies, so a bad option never costs the user a compaction.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from .gate import DEFAULT_MIN_FREED_PERCENT, DEFAULT_TARGET_PERCENT
from ..options import (
    POLICIES,
    DEFAULT_KEEP_THRESHOLD,
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_MAX_REQUEST_TOKENS,
    DEFAULT_MAX_STATE_TOKENS,
    DEFAULT_PRESERVE_RECENT_MESSAGES,
    DEFAULT_TRUNCATE_HEAD_CHARS,
    CompactOptions,
    resolve_options,
)

Judge = Literal["auto", "local", "jev"]
JUDGES: tuple[Judge, ...] = ("auto", "local", "jev")

DEFAULT_COMPACT_AT_PERCENT = 60.0
DEFAULT_MIN_REDUCTION_RATIO = 0.25
DEFAULT_MODEL = "jev-latest"
DEFAULT_JUDGE: Judge = "auto"
DEFAULT_JEV_TIMEOUT_SECONDS = 15.0
# The mod kills the hook process after this long (hooks/mod.mjs, same default and range).
DEFAULT_TIMEOUT_SECONDS = 120.0
MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS = 1.0, 600.0
# Env variables that, set, mean "a Jev key is configured" for judge 'auto'.
KEY_ENV_VARS = ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY")


@dataclass(frozen=True)
class HookConfig:
    keep_threshold: float = DEFAULT_KEEP_THRESHOLD
    preserve_recent_messages: int = DEFAULT_PRESERVE_RECENT_MESSAGES
    compact_at_percent: float = DEFAULT_COMPACT_AT_PERCENT
    min_reduction_ratio: float = DEFAULT_MIN_REDUCTION_RATIO
    policy: str = "budget"
    target_percent: float = DEFAULT_TARGET_PERCENT
    min_freed_percent: float = DEFAULT_MIN_FREED_PERCENT
    max_state_tokens: float = DEFAULT_MAX_STATE_TOKENS
    max_request_tokens: float = DEFAULT_MAX_REQUEST_TOKENS
    truncate_head_chars: int = DEFAULT_TRUNCATE_HEAD_CHARS
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS
    model: str = DEFAULT_MODEL
    base_url: str = ""
    api_key: str = ""
    judge: Judge = DEFAULT_JUDGE
    goal: str = ""
    jev_timeout_seconds: float = DEFAULT_JEV_TIMEOUT_SECONDS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    def __repr__(self) -> str:  # the key must never reach a log line
        shown = "set" if self.api_key else "unset"
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__ if name != "api_key"
        )
        return f"HookConfig({fields}, api_key={shown})"

    def compact_options(self, goal: str) -> CompactOptions:
        return resolve_options(
            goal=goal,
            keep_threshold=self.keep_threshold,
            preserve_recent_messages=self.preserve_recent_messages,
            max_state_tokens=self.max_state_tokens,
            max_request_tokens=self.max_request_tokens,
            truncate_head_chars=self.truncate_head_chars,
            max_concurrent_requests=self.max_concurrent_requests,
            policy=self.policy,
        )

    def key(self, env: Mapping[str, str] | None = None) -> str:
        """The Jev key: the option first, then the environment."""
        if self.api_key:
            return self.api_key
        env = os.environ if env is None else env
        for name in KEY_ENV_VARS:
            value = (env.get(name) or "").strip()
            if value:
                return value
        return ""

    def use_jev(self, env: Mapping[str, str] | None = None) -> bool:
        """``jev`` always; ``auto`` only when a key is configured; ``local`` never."""
        if self.judge == "jev":
            return True
        if self.judge == "local":
            return False
        return bool(self.key(env))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _string(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def resolve_hook_config(options: Mapping[str, Any] | None) -> HookConfig:
    """Read the camelCase plugin options; anything missing or mistyped takes the default."""
    raw: Mapping[str, Any] = options if isinstance(options, Mapping) else {}
    base = HookConfig()

    def num(key: str, default: float, ok: Any = None) -> float:
        value = _number(raw.get(key))
        if value is None or (ok is not None and not ok(value)):
            return default
        return value

    def whole(key: str, default: int, minimum: int) -> int:
        value = _number(raw.get(key))
        return default if value is None else max(minimum, math.floor(value))

    judge = raw.get("judge")
    return HookConfig(
        keep_threshold=num("keepThreshold", base.keep_threshold, lambda v: 0 <= v <= 1),
        preserve_recent_messages=whole("preserveRecentMessages", base.preserve_recent_messages, 0),
        compact_at_percent=num("compactAtPercent", base.compact_at_percent, lambda v: 0 < v <= 100),
        min_reduction_ratio=num("minReductionRatio", base.min_reduction_ratio, lambda v: 0 <= v <= 1),
        policy=raw.get("policy") if raw.get("policy") in POLICIES else base.policy,
        target_percent=num("targetPercent", base.target_percent, lambda v: 0 < v <= 100),
        min_freed_percent=num("minFreedPercent", base.min_freed_percent, lambda v: 0 <= v <= 100),
        max_state_tokens=num("maxStateTokens", base.max_state_tokens, lambda v: v >= 1),
        max_request_tokens=num("maxRequestTokens", base.max_request_tokens, lambda v: v >= 1),
        truncate_head_chars=whole("truncateHeadChars", base.truncate_head_chars, 0),
        max_concurrent_requests=whole("maxConcurrentRequests", base.max_concurrent_requests, 1),
        model=_string(raw.get("model")) or base.model,
        base_url=_string(raw.get("baseUrl")) or base.base_url,
        api_key=_string(raw.get("apiKey")) or base.api_key,
        judge=judge if judge in JUDGES else base.judge,
        goal=_string(raw.get("goal")) or base.goal,
        jev_timeout_seconds=num("jevTimeoutSeconds", base.jev_timeout_seconds, lambda v: v > 0),
        timeout_seconds=num(
            "timeoutSeconds", base.timeout_seconds, lambda v: MIN_TIMEOUT_SECONDS <= v <= MAX_TIMEOUT_SECONDS
        ),
    )
