"""The Jev wire format: request bodies, response parsing and actionable status hints.

Pure functions over strings, so they are testable without a network and shared by every
transport. A response is validated as a ``protocol.JevResponse`` (an answers object, a usage);
the answers returned here are still raw, ``answers.read_noul_answers`` validates each of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ValidationError

from ..errors import JevRequestError, JevResponseError, render_hint
from ..options import KEY_ENV_VARS
from ..state.answers import MISSING_ANSWERS, read_usage
from ..state.asker import Usage
from ..state.protocol import RESPONSE_ADAPTER
from ..textutil import js_json

CloudflareForm = Literal["catalog", "classic"]

DEFAULT_KEY_SOURCE = " or ".join(KEY_ENV_VARS["systemone"])


def hint_for_status(status: int, key_source: str = DEFAULT_KEY_SOURCE) -> str:
    """What the user should do about a non-2xx status, as the CLI says it ('' when nothing specific)."""
    return render_hint(JevRequestError(status, key_source=key_source).hint)


def build_body(model: str, state: Any, questions: Mapping[str, Any]) -> str:
    """The System One / OpenRouter body: ``{"model", "state", "questions"}`` in that order."""
    return js_json({"model": model, "state": state, "questions": dict(questions)})


def build_cloudflare_body(form: CloudflareForm, model: str, state: Any, questions: Mapping[str, Any]) -> str:
    """Workers AI body: the catalog form names the model in the body, the classic form in the path."""
    payload: dict[str, Any] = {"state": state, "questions": dict(questions)}
    if form == "catalog":
        return js_json({"model": model, "input": payload})
    return js_json(payload)


def _raise_for_status(status: int, text: str, key_source: str) -> None:
    if not 200 <= status < 300:
        raise JevRequestError(status, text, key_source)


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise JevResponseError("Jev returned malformed JSON") from None


def parse_response(
    status: int, text: str, key_source: str = DEFAULT_KEY_SOURCE
) -> tuple[Mapping[str, Any], Usage]:
    """``(answers, usage)`` from a System One / OpenRouter response, or a typed error."""
    _raise_for_status(status, text, key_source)
    return _answers_and_usage(_load_json(text))


def _answers_and_usage(data: Any) -> tuple[Mapping[str, Any], Usage]:
    """A ``protocol.JevResponse``'s answers and usage."""
    try:
        response = RESPONSE_ADAPTER.validate_python(data)
    except ValidationError:
        raise JevResponseError(MISSING_ANSWERS) from None
    return response["answers"], read_usage(response.get("usage"))


def _cloudflare_errors(errors: Any) -> str:
    parts: list[str] = []
    if isinstance(errors, list):
        for item in errors:
            if isinstance(item, Mapping):
                code = item.get("code")
                message = str(item.get("message", "")).strip()
                parts.append(f"{code}: {message}" if code is not None else message)
            elif item is not None:
                parts.append(str(item))
    return "; ".join(p for p in parts if p) or "no error details"


def parse_cloudflare_response(
    status: int, text: str, key_source: str = " or ".join(KEY_ENV_VARS["cloudflare"])
) -> tuple[Mapping[str, Any], Usage]:
    """``(answers, usage)`` from a Workers AI response, enveloped or bare.

    The envelope is ``{success, result: {answers, usage?}, errors}``; some proxies return the bare
    ``result``. Inside an envelope, a ``result`` without an ``answers`` key is the answers object.
    """
    _raise_for_status(status, text, key_source)
    data = _load_json(text)
    if not isinstance(data, dict):
        raise JevResponseError(MISSING_ANSWERS)
    if "success" in data or "result" in data:
        if data.get("success") is False:
            raise JevResponseError(f"Cloudflare Workers AI reported errors: {_cloudflare_errors(data.get('errors'))}")
        result = data.get("result")
        if not isinstance(result, dict):
            raise JevResponseError(MISSING_ANSWERS)
        if "answers" not in result:
            return result, read_usage(data.get("usage"))
        return _answers_and_usage(result)
    return _answers_and_usage(data)
