"""The Jev protocol's wire shapes, declared once as pydantic models (docs/ARCHITECTURE.md, Contracts).

The state every judge reads, the ``noul`` questions, the answers, and the request bodies
``fast-jev serve`` takes, in that order, then one adapter each. The client's answers
(``answers.read_noul_answers``), the local judge's input (``judge.state.validate_state`` /
``validate_questions``) and the server's requests (``jev/server.py``) are validated with these
adapters, and ``schemas/jev-*.schema.json`` are generated from them
(``python tests/test_schemas.py --write``).

Unknown members are allowed everywhere: a newer client or server may send more. The state is
read tolerantly past its shape (``judge/state.read_state``), so only what the contract promises
is checked here: the types of the members that are present, and ``history`` itself.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

_OPEN = ConfigDict(extra="allow")


def first_problem(error: ValidationError, *prefix: str) -> str:
    """The first problem pydantic found, as one line: ``field.path: message``, the path led by
    ``prefix`` (the name of what was validated)."""
    first = error.errors(include_url=False, include_context=False, include_input=False)[0]
    where = ".".join(str(part) for part in (*prefix, *first["loc"]))
    return f"{where}: {first['msg']}" if where else first["msg"]


@with_config(_OPEN)
class StructuredCall(TypedDict):
    """A call of a history entry while the state shows each call in full."""

    id: str
    tool: str
    # The call's input as JSON text, cut to the stage's length.
    input: NotRequired[str]
    # "ok, 1234 chars (omitted)" or "error, N chars (omitted)".
    result: NotRequired[str]
    # The output's opening … closing [terms: …], at the first two stages only.
    digest: NotRequired[str]


@with_config(_OPEN)
class PendingCall(TypedDict):
    """A call whose result is not in the transcript yet; never asked about."""

    tool_use_id: str
    tool: str
    input: NotRequired[str]


@with_config(_OPEN)
class StateEntry(TypedDict):
    """One message of the history."""

    i: NotRequired[int]
    role: NotRequired[Literal["user", "assistant"]]
    text: NotRequired[str]
    # Structured calls, or once the state had to shrink one-line strings
    # ("t3 Read file_path=/a/b.py → ok 1234ch").
    tool_calls: NotRequired[list[StructuredCall | str]]
    pending_calls: NotRequired[list[PendingCall]]


@with_config(_OPEN)
class JevState(TypedDict):
    """``{"context", "goal", "history"}``: what every judge reads."""

    context: NotRequired[str]
    goal: NotRequired[str | None]
    history: list[StateEntry]


def _state_text(value: Any) -> Any:
    """A state may come as the JSON text of one."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("a string but not JSON of a compaction state") from None
    return value


StateField = Annotated[JevState, BeforeValidator(_state_text)]


@with_config(_OPEN)
class NoulQuestion(TypedDict):
    """A question answered by a probability in [0, 1]; the only type a compaction asks."""

    type: Literal["noul"]
    instructions: str


Questions = Annotated[dict[Annotated[str, Field(min_length=1)], NoulQuestion], Field(min_length=1)]


@with_config(ConfigDict(extra="allow", strict=True))
class NoulAnswer(TypedDict):
    """One answer; a missing ``type`` is the legacy shape and stays accepted. Strict: JSON
    ``true`` is not a probability, nor is the text ``"0.5"``."""

    type: NotRequired[Literal["noul"]]
    noul: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


Answers = dict[str, NoulAnswer]


@with_config(_OPEN)
class JevResponse(TypedDict):
    """A response's ``{answers, usage?}`` (a Workers AI envelope's ``result``). The answers are
    checked one by one against the questions asked (``answers.read_noul_answers``), the usage
    read tolerantly (``answers.read_usage``): here only that there is an answers object."""

    answers: dict[str, Any]
    usage: NotRequired[Any]


@with_config(_OPEN)
class JevPayload(TypedDict):
    """The state and the questions: a Workers AI classic body, or a catalog body's ``input``."""

    state: StateField
    questions: Questions


@with_config(_OPEN)
class SystemOneRequest(JevPayload):
    """``POST /v1/systemone`` (and OpenRouter's path): ``{model, state, questions}``."""

    model: NotRequired[str | None]


@with_config(_OPEN)
class CloudflareCatalogRequest(TypedDict):
    """``POST /client/v4/accounts/<id>/ai/run``: the model named in the body."""

    model: str
    input: JevPayload


STATE_ADAPTER: TypeAdapter[JevState] = TypeAdapter(StateField)
QUESTIONS_ADAPTER: TypeAdapter[dict[str, NoulQuestion]] = TypeAdapter(Questions)
ANSWER_ADAPTER: TypeAdapter[NoulAnswer] = TypeAdapter(NoulAnswer)
ANSWERS_ADAPTER: TypeAdapter[Answers] = TypeAdapter(Answers)
RESPONSE_ADAPTER: TypeAdapter[JevResponse] = TypeAdapter(JevResponse)
PAYLOAD_ADAPTER: TypeAdapter[JevPayload] = TypeAdapter(JevPayload)
SYSTEM_ONE_ADAPTER: TypeAdapter[SystemOneRequest] = TypeAdapter(SystemOneRequest)
CLOUDFLARE_CATALOG_ADAPTER: TypeAdapter[CloudflareCatalogRequest] = TypeAdapter(CloudflareCatalogRequest)
