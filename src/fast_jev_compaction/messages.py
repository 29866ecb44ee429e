"""The conversation shapes Claude Code hands a compaction hook (its ``SessionMessage``).

These pydantic models are the library's boundary. Unknown fields (``handle``, ``uuid``,
``result``, ``meta``, ...) are kept as extras so that an untouched message goes back to the
engine exactly as it came in.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant"]


class ToolUse(BaseModel):
    """A tool_use block of an assistant message; ``text``/``isError`` copy its outcome."""

    model_config = ConfigDict(extra="allow", frozen=True)

    tool_use_id: str
    tool: str
    input: dict[str, Any] = Field(default_factory=dict)
    text: str | None = None
    isError: bool | None = None


class ToolResult(BaseModel):
    """A tool_result block of a user message."""

    model_config = ConfigDict(extra="allow", frozen=True)

    tool_use_id: str
    text: str = ""
    isError: bool | None = None


class SessionMessage(BaseModel):
    """One conversation message: text plus its tool blocks."""

    model_config = ConfigDict(extra="allow", frozen=True)

    role: Role
    text: str = ""
    toolUses: list[ToolUse] = Field(default_factory=list)
    toolResults: list[ToolResult] | None = None
    handle: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The JSON shape Claude Code reads back: no ``None`` members, extras kept."""
        return self.model_dump(mode="json", exclude_none=True)


def parse_messages(data: Any) -> list[SessionMessage]:
    """Validate a JSON list of SessionMessage-shaped objects."""
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of messages")
    return [SessionMessage.model_validate(item) for item in data]
