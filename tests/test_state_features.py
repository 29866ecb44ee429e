"""The fitted judge's features read from a Jev state: what matches the in-process features exactly,
and the digest read back as the state renders it."""

from __future__ import annotations

import math

import pytest

from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.judge.features import FEATURE_NAMES, call_features
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.judge.model import load_state_model
from fast_jev_compaction.judge.state import read_state
from fast_jev_compaction.judge.state_features import state_features
from fast_jev_compaction.state.fitting import fit_state
from fast_jev_compaction.state.goal import goal_from_messages
from fast_jev_compaction.state.history import output_digest, read_digest
from fast_jev_compaction.state.questions import batch_questions
from planted_sessions import planted_session

# Read from the call line, the note and the positions: the same as in process on a full state.
EXACT = ("size_log", "tiny", *(n for n in FEATURE_NAMES if n.startswith("kind_")), "is_error", "age_fraction",
         "calls_after_fraction", "recency", "prompts_after", "superseded", "edited_unread")


@pytest.mark.parametrize(
    "text",
    [
        "alpha\n  beta gamma  \n\nsrc/pkg/module_name.py: 3 passed",
        "\n".join(f"tests/test_mod_{n}.py::test_case_{n} PASSED" for n in range(900)) + "\nFAILED tests/x.py::t - boom",
        "no terms here at all",
    ],
)
def test_a_digest_reads_back_into_its_lines_and_terms(text: str) -> None:
    digest = output_digest(text, 300)
    lines, terms = read_digest(digest)
    flat = " ⏎ ".join(lines)
    assert digest == (f"{flat} [terms: {' '.join(terms)}]" if terms else flat)
    assert all(line.strip() == line and line for line in lines)
    if len(text) < 200:
        assert lines == [line.strip() for line in text.splitlines() if line.strip()]
    assert read_digest("") == ([], [])


@pytest.mark.parametrize("seed", range(3))
def test_features_from_a_full_state_match_the_messages_where_the_state_tells_all(seed: int) -> None:
    messages = planted_session(seed).messages
    pairing = pair_tool_calls(messages, 6)
    goal = goal_from_messages(messages)
    fitted = fit_state(messages, pairing, goal, 6, 25_000)
    assert fitted.stage == "full"
    from_state = state_features(read_state(fitted.state))
    from_messages = call_features(messages, pairing, goal)
    for call in pairing.calls:
        got, want = from_state[call.id], from_messages[call.tool_use_id]
        for name in EXACT:
            assert math.isclose(got[name], want[name], abs_tol=1e-9), (call.id, call.tool, name, got[name], want[name])
        # the digest is part of the output: the ids it shows are among the output's
        assert got["ids_log"] <= want["ids_log"] + 1e-9
    # the old reads are superseded by nothing and edited by nothing; the re-run test suite is
    assert any(v["superseded"] for v in from_state.values())


def test_the_judge_answers_a_state_with_the_fitted_model_over_those_features() -> None:
    messages = planted_session(0).messages
    pairing = pair_tool_calls(messages, 6)
    goal = goal_from_messages(messages)
    state = fit_state(messages, pairing, goal, 6, 25_000).state
    questions = batch_questions(pairing.candidates)
    answers = LocalJudge().answer(state, questions)
    model = load_state_model()
    features = state_features(read_state(state))
    for call in pairing.candidates:
        keep_result = model.keep_result(features[call.id])
        assert answers[f"result_{call.id}"]["noul"] == pytest.approx(keep_result, rel=1e-12)
        assert answers[f"call_{call.id}"]["noul"] == pytest.approx(model.keep_call(features[call.id], keep_result), rel=1e-9)


def test_a_digest_in_the_state_reaches_the_content_features() -> None:
    """The planted config read holds a value the goal names: only its digest can tell."""
    messages = planted_session(1).messages
    pairing = pair_tool_calls(messages, 6)
    config = next(c for c in pairing.calls if c.input.get("file_path") == "/repo/config/payments.yaml")
    fitted = fit_state(messages, pairing, "check ledger_port and setting_1 in payments.yaml", 6, 25_000)
    with_digest = state_features(read_state(fitted.state))[config.id]
    for entry in fitted.state["history"]:
        for item in entry.get("tool_calls", []):
            item.pop("digest", None)
    without = state_features(read_state(fitted.state))[config.id]
    assert with_digest["goal_overlap"] > 0 and without["goal_overlap"] == 0
