"""The state sent to the judge: history rendering, goal and fitting (upstream §3, §4.2-4.3,
§8.1 "state")."""

from __future__ import annotations

import pytest

from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.errors import FittingError
from fast_jev_compaction.state.fitting import fit_state
from fast_jev_compaction.state.goal import goal_from_messages, goal_with_instructions
from fast_jev_compaction.state.history import DIGEST_CHARS, history_entries, one_line_call, one_line_input, output_digest
from fast_jev_compaction.state.questions import STATE_CONTEXT
from fast_jev_compaction.state.tokens import estimate_tokens
from fast_jev_compaction.textutil import js_json, truncate
from scripted_asker import (
    BASH_OUT,
    FILE_A,
    FILE_B,
    FIRST_PROMPT,
    LAST_PROMPT,
    assistant,
    call,
    read_pairs,
    result,
    results,
    ten_messages,
    use,
    user,
)

BIG = 10**9
ELL = "\u2026"
UPSTREAM_EMPTY_STATE_TOKENS = 130  # upstream §3.3: context + empty goal, no history


def spec_tokens(goal: str, history: list[dict]) -> int:
    """Upstream §4.2 accounting: the empty state, plus each entry's estimate + 1 for its comma."""
    base = estimate_tokens(js_json({"context": STATE_CONTEXT, "goal": goal, "history": []}))
    return base + sum(estimate_tokens(js_json(entry)) + 1 for entry in history)


def fit(messages, limit=BIG, preserve=3, goal="g"):
    return fit_state(messages, pair_tool_calls(messages, preserve), goal, preserve, limit)


def spec_abridge(text: str) -> str:
    """Upstream §3.4 written out independently: 400 head, 150 tail, count of what is left out."""
    return text[:400] + f"\n[{ELL} {len(text) - 550} chars omitted {ELL}]\n" + text[-150:]


# -- history --------------------------------------------------------------------------------------


class TestHistory:
    def test_ten_message_state(self):
        fitted = fit(ten_messages(), goal=goal_from_messages(ten_messages()))
        assert fitted.stage == "full"
        state = fitted.state
        assert list(state) == ["context", "goal", "history"]
        assert state["context"] == STATE_CONTEXT
        history = state["history"]
        assert [e["i"] for e in history] == [0, 1, 3, 4, 6, 8, 9]
        # Ours: besides its note, each output shows the judge a bounded digest (upstream showed
        # only the note, so the judge could not read what an output held).
        for entry, body in ((history[1], FILE_A), (history[3], FILE_B), (history[4], BASH_OUT)):
            digest = entry["tool_calls"][0]["digest"]
            assert digest == output_digest(body, DIGEST_CHARS[1000]) and len(digest.split(" [terms: ")[0]) <= 303
        assert history[0]["text"] == FIRST_PROMPT and history[-1]["text"] == LAST_PROMPT
        assert history[1]["tool_calls"] == [
            {
                "id": "t1", "tool": "Read", "input": '{"file_path":"src/a.ts"}',
                "result": f"ok, {len(FILE_A)} chars (omitted)", "digest": output_digest(FILE_A, 300),
            }
        ]
        assert history[3]["tool_calls"][0]["result"] == f"ok, {len(FILE_B)} chars (omitted)"
        assert history[4]["tool_calls"][0]["result"] == f"error, {len(BASH_OUT)} chars (omitted)"
        assert "tool_calls" not in history[2] and "tool_calls" not in history[0]
        assert history[2] == {"i": 3, "role": "assistant", "text": "The constant looks right; the test must be reading b."}

    def test_estimate_is_at_least_the_estimate_of_the_whole_state(self):
        for limit in (BIG, 600):
            fitted = fit(ten_messages(), limit=limit)
            assert fitted.tokens >= estimate_tokens(js_json(fitted.state))

    def test_pending_calls_are_listed_and_orphans_are_invisible(self):
        messages = [
            user("go"),
            assistant("", use("pend", "Bash", command="sleep 1000 # PENDING_MARK")),
            results(result("ghost", "ORPHAN_BODY")),
            user("end"),
        ]
        history = history_entries(messages, pair_tool_calls(messages, 0), 1000)
        assert history == [
            {"i": 0, "role": "user", "text": "go"},
            {
                "i": 1,
                "role": "assistant",
                "text": "",
                "pending_calls": [{"tool_use_id": "pend", "tool": "Bash", "input": '{"command":"sleep 1000 # PENDING_MARK"}'}],
            },
            {"i": 3, "role": "user", "text": "end"},
        ]

    def test_blank_messages_without_calls_are_skipped(self):
        messages = [user("go"), assistant("   \n"), call("c"), results(result("c", "x"), text=" "), user("end")]
        history = history_entries(messages, pair_tool_calls(messages, 0), 1000)
        assert [e["i"] for e in history] == [0, 2, 4]

    def test_input_is_truncated_json(self):
        messages = [user("go"), call("c", "Write", file_path="f", content="y" * 100), results(result("c", "ok")), user("e")]
        pairing = pair_tool_calls(messages, 0)
        rendered = history_entries(messages, pairing, 40)[1]["tool_calls"][0]["input"]
        prefix = '{"file_path":"f","content":"'
        assert rendered == prefix + "y" * (39 - len(prefix)) + ELL
        assert len(rendered) == 40

    def test_unserializable_input(self):
        messages = [user("go"), call("c", "Odd", value={1, 2}), results(result("c", "ok")), user("e")]
        pairing = pair_tool_calls(messages, 0)
        assert history_entries(messages, pairing, 1000)[1]["tool_calls"][0]["input"] == "[unserializable input]"
        assert one_line_call(pairing.calls[0]) == "t1 Odd value=[unserializable input] → ok 2ch"


class TestOneLiners:
    def test_upstream_example(self):
        calls = pair_tool_calls(read_pairs(1), 0).calls
        assert one_line_call(calls[0]) == "t1 Read file_path=/repo/src/module-0.ts → ok 1ch"

    def test_non_string_values_print_once(self):
        """Deliberate difference (b): upstream printed `limit={"limit":100}`; we print `limit=100`."""
        assert one_line_input({"file_path": "a.ts", "limit": 100, "all": True}) == "file_path=a.ts limit=100 all=true"
        assert one_line_input({"opts": {"a": [1, 2]}}) == 'opts={"a":[1,2]}'

    def test_whitespace_collapses_and_line_is_cut_at_60(self):
        assert one_line_input({"command": "ls  -la\n\t/tmp"}) == "command=ls -la /tmp"
        long = one_line_input({"command": "echo " + "a " * 50})
        assert len(long) == 60 and long.endswith(ELL)
        assert long == ("command=echo " + "a " * 50)[:59] + ELL

    def test_error_status(self):
        messages = [user("go"), call("c", "Bash", command="false"), results(result("c", "boom", True)), user("e")]
        assert one_line_call(pair_tool_calls(messages, 0).calls[0]) == "t1 Bash command=false → error 4ch"


# -- goal -----------------------------------------------------------------------------------------


class TestGoal:
    def test_last_three_prompts_oldest_first(self):
        messages = [user("one"), assistant("reply"), user("two"), user("three"), user("four")]
        assert goal_from_messages(messages) == "two\nthree\nfour"

    def test_default_goal_contains_the_latest_prompts(self):
        goal = goal_from_messages(ten_messages())
        assert goal == f"{FIRST_PROMPT}\n{LAST_PROMPT}"

    def test_prompts_are_cut_to_500(self):
        goal = goal_from_messages([user("p" * 800)])
        assert goal == "p" * 499 + ELL

    def test_result_messages_and_blank_texts_do_not_count(self):
        messages = [user("real"), results(result("x", "r"), text="user text riding on a result"), user("   ")]
        assert goal_from_messages(messages) == "real"

    def test_injected_texts_are_skipped(self):
        """Deliberate difference (d): upstream took host-injected user texts as the goal (§9.11)."""
        messages = [
            user("fix the parser"),
            user("<system-reminder>REMINDER_MARK</system-reminder>"),
            user("<command-name>/clear</command-name>\n<command-message>clear</command-message>"),
            user("<local-command-stdout>LOCAL_MARK</local-command-stdout>"),
            user("META_MARK", isMeta=True),
            user("This session is being continued from a previous conversation that ran out of context. CONT_MARK"),
            user("SUMMARY_MARK", isCompactSummary=True),
        ]
        assert goal_from_messages(messages) == "fix the parser"

    def test_injected_block_is_cut_out_of_a_real_prompt(self):
        goal = goal_from_messages([user("<system-reminder>REMINDER_MARK</system-reminder>\nadd a test")])
        assert goal == "add a test"

    def test_instructions_are_appended(self):
        """Regression 11: `/compact <text>` is added to the inferred or configured goal."""
        inferred = goal_from_messages(ten_messages())
        folded = goal_with_instructions(inferred, "keep the test output")
        assert folded.startswith(inferred) and "keep the test output" in folded
        configured = goal_with_instructions("ship the release", "  focus on deploys  ")
        assert "ship the release" in configured and "focus on deploys" in configured
        assert "keep" in goal_with_instructions("", "keep") and goal_with_instructions("", "keep").strip()

    @pytest.mark.parametrize("blank", [None, "", "   ", "\n\t"])
    def test_blank_instructions_leave_goal_exactly(self, blank):
        assert goal_with_instructions("ship the release", blank) == "ship the release"


# -- fitting --------------------------------------------------------------------------------------


def _write_fixture():
    return [
        user("start"),
        call("w", "Write", file_path="src/big.ts", content="x" * 5000),
        results(result("w", "ok")),
        assistant("done"),
    ]


class TestFitting:
    def test_inputs_are_cut_before_texts(self):
        """Upstream: a 5000-char Write reaches `inputs<=200` at a 300-token limit. Our context text
        is longer than upstream's (difference (c)), so the limit is 300 plus that difference: the
        history gets exactly upstream's room. The Write is pinned (preserve 3) to show pinned
        inputs are cut too."""
        messages = _write_fixture()
        base = spec_tokens("start", [])
        # Plus the Write output's digest at this stage, which upstream's state did not carry.
        written = next(r.text for m in messages for r in m.toolResults or ())
        digest = estimate_tokens(js_json({"digest": output_digest(written, DIGEST_CHARS[200])})) - 1
        limit = 300 + (base - UPSTREAM_EMPTY_STATE_TOKENS) + digest
        fitted = fit(messages, limit=limit, preserve=3, goal="start")
        assert fitted.stage == "inputs<=200"
        assert fitted.tokens <= limit
        history = fitted.state["history"]
        assert history[0]["text"] == "start"
        rendered = history[1]["tool_calls"][0]["input"]
        assert len(rendered) <= 200 and rendered.endswith(ELL)
        assert rendered == truncate(js_json({"file_path": "src/big.ts", "content": "x" * 5000}), 200)

    def test_inputs_cut_to_60(self):
        messages = _write_fixture()
        expected_input = js_json({"file_path": "src/big.ts", "content": "x" * 5000})[:59] + ELL
        history = [
            {"i": 0, "role": "user", "text": "start"},
            {"i": 1, "role": "assistant", "text": "", "tool_calls": [{"id": "t1", "tool": "Write", "input": expected_input, "result": "ok, 2 chars (omitted)"}]},
            {"i": 3, "role": "assistant", "text": "done"},
        ]
        limit = spec_tokens("start", history)
        fitted = fit(messages, limit=limit, preserve=3, goal="start")
        assert (fitted.stage, fitted.state["history"], fitted.tokens) == ("inputs<=60", history, limit)

    def test_old_calls_become_one_liners_then_merge(self):
        messages = read_pairs(40)
        full = fit(messages, preserve=1, goal="start")
        assert full.stage == "full"

        compacted = fit(messages, limit=full.tokens * 0.8, preserve=1, goal="start")
        assert compacted.stage == "old calls compacted"
        assert compacted.tokens <= full.tokens * 0.8
        history = compacted.state["history"]
        assert history[1]["tool_calls"] == ["t1 Read file_path=/repo/src/module-0.ts → ok 1ch"]
        # Re-checked after each entry: the newest old calls are still structured.
        assert isinstance(history[-2]["tool_calls"][0], dict)

        merged = fit(messages, limit=full.tokens * 0.45, preserve=1, goal="start")
        assert merged.stage == "old calls merged"
        assert merged.tokens <= full.tokens * 0.45
        history = merged.state["history"]
        assert len(history) == 3
        assert history[0] == {"i": 0, "role": "user", "text": "start"}
        assert history[2] == {"i": 81, "role": "user", "text": "done"}
        assert history[1]["i"] == 1 and history[1]["text"] == ""
        assert history[1]["tool_calls"] == [f"t{k + 1} Read file_path=/repo/src/module-{k}.ts → ok 1ch" for k in range(40)]

    def _long_texts(self):
        def text(word: str, n: int) -> str:
            return " ".join(f"{word}{k % 7}" for k in range(n))

        return [
            user("lorem ipsum " + text("lorem", 500)),
            assistant(text("alpha", 450)),
            assistant(text("beta", 420)),
            user("latest " + text("gamma", 400)),
        ]

    def test_non_pinned_text_is_abridged_first(self):
        messages = self._long_texts()
        texts = [m.text for m in messages]
        expected = [
            {"i": 0, "role": "user", "text": texts[0]},
            {"i": 1, "role": "assistant", "text": spec_abridge(texts[1])},
            {"i": 2, "role": "assistant", "text": texts[2]},
            {"i": 3, "role": "user", "text": texts[3]},
        ]
        limit = spec_tokens("g", expected)
        fitted = fit(messages, limit=limit, preserve=1)
        assert fitted.stage == "texts abridged"
        assert fitted.state["history"] == expected

    def test_pinned_texts_are_abridged_last(self):
        messages = self._long_texts()
        texts = [m.text for m in messages]
        expected = [
            {"i": 0, "role": "user", "text": spec_abridge(texts[0])},
            {"i": 1, "role": "assistant", "text": spec_abridge(texts[1])},
            {"i": 2, "role": "assistant", "text": spec_abridge(texts[2])},
            {"i": 3, "role": "user", "text": texts[3]},
        ]
        fitted = fit(messages, limit=spec_tokens("g", expected), preserve=1)
        assert (fitted.stage, fitted.state["history"]) == ("texts abridged", expected)

    def test_old_text_is_collapsed_to_its_original_length(self):
        messages = self._long_texts()
        texts = [m.text for m in messages]
        expected = [
            {"i": 0, "role": "user", "text": spec_abridge(texts[0])},
            {"i": 1, "role": "assistant", "text": f"[{ELL} {len(texts[1])} chars omitted {ELL}]"},
            {"i": 2, "role": "assistant", "text": spec_abridge(texts[2])},
            {"i": 3, "role": "user", "text": spec_abridge(texts[3])},
        ]
        fitted = fit(messages, limit=spec_tokens("g", expected), preserve=1)
        assert fitted.stage == "old messages collapsed"
        assert fitted.state["history"] == expected
        assert "lorem" in fitted.state["history"][0]["text"]
        assert fitted.state["history"][3]["text"].startswith("latest gamma0")

    def test_old_call_less_messages_are_left_out(self):
        messages = [
            user("start"),
            assistant("note one"),
            call("c", "Read", file_path="a.ts"),
            results(result("c", "abc")),
            assistant("note two"),
            user("done"),
        ]
        expected = [
            {"i": 0, "role": "user", "text": "start"},
            {"i": 2, "role": "assistant", "text": "", "tool_calls": ["t1 Read file_path=a.ts → ok 3ch"]},
            {"i": 4, "role": "assistant", "text": f"[{ELL} 8 chars omitted {ELL}]"},
            {"i": 5, "role": "user", "text": "done"},
        ]
        fitted = fit(messages, limit=spec_tokens("g", expected), preserve=1)
        assert (fitted.stage, fitted.state["history"]) == ("old messages left out", expected)

    def test_a_history_that_cannot_fit_is_rejected(self):
        messages = [user("w " * 1000), assistant("ok")]
        with pytest.raises(FittingError, match=r"^history too large for Jev \(~\d+ tokens after truncation, limit 50\)$"):
            fit(messages, limit=50, preserve=0)
