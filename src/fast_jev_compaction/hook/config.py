"""Plugin options -> hook configuration, by the option table (``options.OPTIONS``).

The mod passes the ``userConfig`` values it was registered with. Values can be missing (an option
at its default may be absent), or of the wrong type (a hand-edited settings file); either way the
default applies (``options.read_plugin_options``), so a bad option never costs the user a
compaction, and ``notes`` says which value was ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from ..conversation.messages import SessionMessage
from ..options import OPTION, CompactOptions, read_plugin_options, resolve_options
from ..state.goal import compaction_goal

Judge = Literal["auto", "local", "jev"]


def _d(name: str) -> Any:
    return OPTION[name].default


# repr=False: the class writes its own, which never shows the key.
@dataclass(frozen=True, repr=False)
class HookConfig:
    """The plugin options one hook run works with, each checked or at its default."""

    keep_threshold: float = _d("keep_threshold")
    preserve_recent_messages: int = _d("preserve_recent_messages")
    compact_at_percent: float = _d("compact_at_percent")
    target_percent: float = _d("target_percent")
    min_freed_percent: float = _d("min_freed_percent")
    min_reduction_ratio: float = _d("min_reduction_ratio")
    max_state_tokens: float = _d("max_state_tokens")
    max_request_tokens: float = _d("max_request_tokens")
    truncate_head_chars: int = _d("truncate_head_chars")
    digest_chars: int = _d("digest_chars")
    max_concurrent_requests: int = _d("max_concurrent_requests")
    policy: str = _d("policy")
    target_reduction: float = _d("target_reduction")
    keep_floor: float = _d("keep_floor")
    model: str = _d("model")
    base_url: str = _d("base_url")
    api_key: str = _d("api_key")
    judge: Judge = _d("judge")
    provider: str = _d("provider")
    goal: str = _d("goal")
    jev_timeout_seconds: float = _d("jev_timeout_seconds")
    # The mod kills the hook process after this long; the hook's deadline (hook/deadline.py) answers first.
    timeout_seconds: float = _d("timeout_seconds")
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __repr__(self) -> str:  # the key must never reach a log line
        shown = "set" if self.api_key else "unset"
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__ if name not in ("api_key", "notes")
        )
        return f"HookConfig({fields}, api_key={shown})"

    def compact_options(self, messages: list[SessionMessage], instructions: str | None) -> CompactOptions:
        return resolve_options(
            goal=compaction_goal(messages, self.goal, instructions),
            keep_threshold=self.keep_threshold,
            preserve_recent_messages=self.preserve_recent_messages,
            max_state_tokens=self.max_state_tokens,
            max_request_tokens=self.max_request_tokens,
            truncate_head_chars=self.truncate_head_chars,
            digest_chars=self.digest_chars,
            max_concurrent_requests=self.max_concurrent_requests,
            policy=self.policy,
            target_reduction=self.target_reduction,
            keep_floor=self.keep_floor,
            target_percent=self.target_percent,
        )

    def use_jev(self, env: Mapping[str, str] | None = None) -> bool:
        """``jev`` always; ``auto`` only with a key or an endpoint URL; ``local`` never."""
        if self.judge == "local":  # the provider table (and its imports) only matter to the others
            return False
        from ..jev.providers import wants_jev

        return wants_jev(self.judge, provider=self.provider, api_key=self.api_key, base_url=self.base_url, env=env)


def resolve_hook_config(options: Mapping[str, Any] | None) -> HookConfig:
    """Read the camelCase plugin options; anything missing, mistyped or out of range takes the default."""
    values, notes = read_plugin_options(options)
    return HookConfig(**values, notes=tuple(notes))
