"""Each error the user can see says what went wrong, then once what to do, in the reader's terms."""

from __future__ import annotations

import pytest

from fast_jev_compaction.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    CompactionError,
    FittingError,
    InputError,
    JevConfigError,
    JevRequestError,
    JevResponseError,
    JevTimeoutError,
    JevTransportError,
    PairingError,
    TranscriptError,
    exit_code,
    explain,
    render_hint,
)

ERRORS: list[CompactionError] = [
    TranscriptError("s.jsonl:2: invalid JSON"),
    PairingError("Duplicate tool_use_id: toolu_1"),
    FittingError("request budget leaves no room for state and questions"),
    *(JevRequestError(status, "body", "TYPESAFE_API_KEY") for status in (400, 401, 402, 403, 404, 429, 503)),
    JevTransportError("cannot reach http://127.0.0.1:9"),
    JevTimeoutError(15),
    JevResponseError("Jev returned malformed JSON"),
    JevConfigError("TYPESAFE_API_KEY is not configured"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: f"{type(e).__name__}-{getattr(e, 'status', '')}")
def test_one_line_with_its_hint_once_for_each_reader(error: CompactionError) -> None:
    for audience, other in (("cli", "the judge option"), ("plugin", "--judge")):
        text = explain(error, audience)  # type: ignore[arg-type]
        assert "\n" not in text and "{" not in text and other not in text
        hint = render_hint(error.hint, audience)  # type: ignore[arg-type]
        assert text == (f"{error}; {hint}" if hint else str(error))
        if hint:
            assert text.count(hint) == 1 and hint not in str(error)


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_bad_input_exits_2_and_a_failed_judge_or_budget_exits_1(error: CompactionError) -> None:
    assert exit_code(error) == (EXIT_BAD_INPUT if isinstance(error, InputError) else EXIT_FAILED)


def test_hints_name_the_flag_or_the_plugin_option() -> None:
    timeout = JevTimeoutError(15)
    assert explain(timeout) == "Jev request timed out after 15000 ms; raise --timeout or use the embedded judge (--judge local)"
    assert explain(timeout, "plugin") == (
        "Jev request timed out after 15000 ms; raise the jevTimeoutSeconds option "
        "or use the embedded judge (the judge option set to local)"
    )
