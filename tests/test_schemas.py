"""The published JSON Schemas (schemas/*.schema.json) are what the pydantic models generate now.

Run ``python tests/test_schemas.py --write`` to rewrite them from the models after changing one:
the hook's stdin document (``hook/event.HookEventWire``, its messages ``messages.SessionMessageWire``)
and the Jev protocol's state, request and answers (``protocol.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from fast_jev_compaction.hook.event import HookEventWire
from fast_jev_compaction.state.protocol import ANSWERS_ADAPTER, STATE_ADAPTER, SYSTEM_ONE_ADAPTER

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def generated() -> dict[str, dict[str, Any]]:
    """File name -> the schema the models give, titled and dated to a draft."""
    made = {
        "hook-event.schema.json": ("The session.compact event on the hook's stdin", TypeAdapter(HookEventWire)),
        "jev-state.schema.json": ("The Jev state every judge reads", STATE_ADAPTER),
        "jev-request.schema.json": ("A Jev request: POST /v1/systemone {model, state, questions}", SYSTEM_ONE_ADAPTER),
        "jev-answers.schema.json": ("A Jev response's answers: a noul probability per question", ANSWERS_ADAPTER),
    }
    return {name: {"$schema": DRAFT, **adapter.json_schema(), "title": title} for name, (title, adapter) in made.items()}


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(generated()))
def test_the_committed_schema_is_what_the_models_generate(name: str) -> None:
    path = SCHEMAS / name
    assert path.is_file(), f"{path} is missing: run python tests/test_schemas.py --write"
    assert path.read_text(encoding="utf-8") == text(generated()[name]), f"{name} is stale: run python tests/test_schemas.py --write"


def test_no_schema_is_left_over() -> None:
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(generated())


def test_the_hook_event_schema_keeps_the_wire_names() -> None:
    schema = generated()["hook-event.schema.json"]
    assert schema["required"] == ["messages"] and schema["additionalProperties"] is True
    message = schema["$defs"]["SessionMessageWire"]
    assert message["required"] == ["role"] and set(message["properties"]) == {"role", "text", "toolUses", "toolResults", "handle"}


def write() -> None:
    SCHEMAS.mkdir(exist_ok=True)
    for name, schema in generated().items():
        (SCHEMAS / name).write_text(text(schema), encoding="utf-8")


if __name__ == "__main__" and "--write" in sys.argv:
    write()
