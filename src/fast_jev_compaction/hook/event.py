"""The one JSON document the mod writes to the entry's stdin (docs/ARCHITECTURE.md, hook protocol)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..messages import SessionMessage

TRIGGERS = ("manual", "auto", "plugin", "precompute")


class HookEvent(BaseModel):
    """``session.compact`` as the mod forwards it, plus the context the child cannot look up.

    A ``$.process.run`` child does not inherit the plugin's root, data folder, session id or
    options, so the mod passes them here. Unknown fields are kept: a newer mod may send more.
    """

    model_config = ConfigDict(extra="allow")

    event: str = "session.compact"
    # Kept as free text: an engine that adds a trigger should still get a compaction.
    trigger: str = "manual"
    instructions: str | None = None
    agentId: str | None = None
    sessionId: str | None = None
    pluginRoot: str | None = None
    pluginData: str | None = None
    cwd: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    # ``$.session.usage().context`` before the compaction: {tokens, window, percent}, when known.
    context: dict[str, Any] | None = None
    messages: list[SessionMessage]

    @property
    def is_precompute(self) -> bool:
        return self.trigger == "precompute"


def read_event(document: Any) -> HookEvent:
    """Validate one event, message by message.

    pydantic validates in Rust without releasing the GIL, so one call over a huge event would
    starve the deadline watchdog (``entry.AnswerGuard``); one call per message lets it run.
    An invalid event is validated again as a whole, for an error that names the field.
    """
    messages = document.get("messages") if isinstance(document, dict) else None
    if not isinstance(messages, list):
        return HookEvent.model_validate(document)
    try:
        event = HookEvent.model_validate({**document, "messages": []})
        event.messages = [SessionMessage.model_validate(message) for message in messages]
    except ValidationError:
        return HookEvent.model_validate(document)
    return event
