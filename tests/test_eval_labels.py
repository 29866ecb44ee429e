"""Behavioural labels, reuse snippets, fire points and the outcome of a compacted prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_sessions import LONG_ID, SENTENCE, call, filler, prompt, result, reuse_session, said
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.evaluation.firepoints import fire_index, prefix
from fast_jev_compaction.evaluation.labels import label_outputs
from fast_jev_compaction.evaluation.metrics import auc
from fast_jev_compaction.evaluation.outcome import (
    MARKER_PATH,
    Context,
    cut_long_results,
    drop_everything,
    measure,
    original_results,
    result_chars,
)
from fast_jev_compaction.judge.reuse import long_ids, shingles


def test_a_shingle_quoted_later_in_an_edit_makes_the_read_needed_until_that_edit() -> None:
    messages = reuse_session(reused=True)
    edit_at = next(i for i, m in enumerate(messages) if m.toolUses and m.toolUses[0].tool == "Edit")
    label = label_outputs(messages)["sr"]
    assert label.needed_after(edit_at)
    assert not label.needed_after(edit_at + 1)  # the reuse lies before this fire point
    assert not label.reproducible


def test_an_output_nobody_quotes_is_not_needed() -> None:
    assert not label_outputs(reuse_session(reused=False))["sr"].needed_after(1)


def test_read_line_numbers_do_not_hide_the_reuse() -> None:
    assert shingles(f"     1→{SENTENCE}") == shingles(SENTENCE)


def test_a_long_id_reused_in_a_later_command_makes_the_output_needed() -> None:
    messages = [
        prompt("deploy the service"),
        call("d", "Bash", command="deploy --service api"),
        result("d", f"created deployment {LONG_ID}"),
        call("w", "Bash", command=f"kubectl rollout status {LONG_ID}"),
        result("w", "ok"),
    ]
    assert label_outputs(messages)["d"].needed_after(3)
    assert LONG_ID in long_ids(f"created deployment {LONG_ID}.")


def test_assistant_prose_counts_as_reuse_but_a_user_prompt_does_not() -> None:
    base = [prompt("look"), call("r", "Read", file_path="/a.py"), result("r", SENTENCE)]
    assert label_outputs([*base, said(f"It says: {SENTENCE}")])["r"].needed_after(3)
    assert not label_outputs([*base, prompt(f"It says: {SENTENCE}")])["r"].needed_after(3)


def test_text_the_user_typed_before_the_output_is_not_credited_to_it() -> None:
    messages = [
        prompt(f"The spec says: {SENTENCE}"),
        call("r", "Read", file_path="/a.py"),
        result("r", SENTENCE),
        said(f"Yes: {SENTENCE}"),
    ]
    assert not label_outputs(messages)["r"].needed_after(3)


def test_a_re_read_or_an_identical_re_run_makes_the_output_reproducible() -> None:
    messages = [
        prompt("look"),
        call("r1", "Read", file_path="/a.py"),
        result("r1", SENTENCE),
        call("g1", "Grep", pattern="token"),
        result("g1", "a.py:1"),
        call("r2", "Read", file_path="/a.py"),
        result("r2", SENTENCE),
        call("g2", "Grep", pattern="token"),
        result("g2", "a.py:1"),
        call("r3", "Read", file_path="/b.py"),
        result("r3", "other"),
        said(f"Found {SENTENCE}"),
    ]
    labels = label_outputs(messages)
    assert labels["r1"].reproducible and labels["r1"].reproduced_at == 5
    assert labels["g1"].reproducible
    assert not labels["r2"].reproducible and not labels["r3"].reproducible
    assert labels["r1"].needed_after(11) and labels["r2"].needed_after(11)


def test_fire_points_keep_at_least_one_message_on_each_side() -> None:
    assert fire_index(10, 0.4) == 4
    assert fire_index(2, 0.9) == 1
    assert fire_index(2, 0.0) == 1
    with pytest.raises(ValueError):
        fire_index(1, 0.5)


def test_a_call_answered_after_the_fire_point_is_not_present_in_the_prefix() -> None:
    messages = [prompt("go"), call("a", "Bash", command="ls"), result("a", "x"), call("b", "Bash", command="pwd"), result("b", "/")]
    head, fire = prefix(messages, 0.8)
    assert fire == 4
    pairing = pair_tool_calls(head, 0)
    assert [c.tool_use_id for c in pairing.calls] == ["a"]
    assert [p.tool_use_id for p in pairing.pending] == ["b"]


def test_auc_counts_pairs_and_ties_half() -> None:
    assert auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert auc([1, 2, 3], [False, True, True]) == 1.0
    assert auc([3, 2, 1], [False, True, True]) == 0.0
    assert auc([1, 1, 1, 1], [False, True, False, True]) == 0.5
    assert auc([1, 2], [True, True]) is None
    with pytest.raises(ValueError):
        auc([1], [True, False])


def test_marker_paths_are_read_from_the_notes() -> None:
    text = "head\n[truncated 900 chars; the full output is saved at /data/a1.txt; Read it if needed]"
    assert [m.group(1) for m in MARKER_PATH.finditer(text)] == ["/data/a1.txt"]
    assert [m.group(1) for m in MARKER_PATH.finditer("Read t3 (full output: /x/t3.txt)")] == ["/x/t3.txt"]


def _outcome(messages, kept, archive=None):
    fire = len(messages)
    pairing = pair_tool_calls(messages, 0)
    return measure(
        pairing.calls,
        original_results(messages, pairing),
        label_outputs([*messages, said(f"Quoting {SENTENCE}")]),
        fire,
        Context.of(kept),
        result_chars(messages),
        archive,
    )


def test_outcome_tells_whole_from_quoted_from_gone_from_recoverable(tmp_path: Path) -> None:
    long = SENTENCE + "\n" + "filler line\n" * 50
    messages = [prompt("go"), call("r", "Read", file_path="/a.py"), result("r", long)]
    whole = _outcome(messages, messages)
    assert (whole.reused, whole.whole, whole.gone) == (1, 1, 0)

    head_kept = [*messages[:2], result("r", long[:120] + "\n[cut]")]
    quoted = _outcome(messages, head_kept)
    assert (quoted.whole, quoted.in_context, quoted.gone) == (0, 1, 0)

    tail_only = [*messages[:2], result("r", "[cut]")]
    gone = _outcome(messages, tail_only)
    assert (gone.gone, gone.gone_partly, gone.recoverable) == (1, 0, 0)

    nine_words = " ".join(SENTENCE.split()[:9])  # two of the three quoted shingles survive
    partly = _outcome(messages, [*messages[:2], result("r", nine_words + "\n[cut]")])
    assert (partly.in_context, partly.gone, partly.gone_partly) == (0, 1, 1)

    saved = tmp_path / "r.txt"
    saved.write_text(long, encoding="utf-8")
    marked = [*messages[:2], result("r", f"[cut; the full output is saved at {saved}; Read it if needed]")]
    assert _outcome(messages, marked).recoverable == 1
    assert _outcome(messages, marked, archive={str(saved): "something else"}).recoverable == 0


def test_baselines_keep_pins_and_drop_or_cut_only_the_rest() -> None:
    messages = [prompt("go"), *filler(3), call("big", "Bash", command="cat log"), result("big", "y" * 9000), *filler(4, 3)]
    pairing = pair_tool_calls(messages, 6)
    dropped = drop_everything(messages, pairing)
    kept_ids = {u.tool_use_id for m in dropped for u in m.toolUses}
    assert kept_ids == {c.tool_use_id for c in pairing.calls if c.pinned}
    cut = cut_long_results(messages, pairing)
    texts = {r.tool_use_id: r.text for m in cut for r in m.toolResults or ()}
    assert texts["big"].startswith("y" * 300) and len(texts["big"]) < 400
    assert texts["f0"] == "step 0"


def test_cut_policies_cut_by_price_or_by_length_and_leave_pins_alone() -> None:
    from fast_jev_compaction.evaluation.frontier import Policy, cut_by_policy, digest

    messages = [
        prompt("go"),
        call("cheap", "Bash", command="cat a"), result("cheap", "a" * 5000),
        call("dear", "Bash", command="cat b"), result("dear", "b" * 5000),
        call("small", "Bash", command="cat c"), result("small", "c" * 300),
        *filler(3),
    ]
    pairing = pair_tool_calls(messages, 6)
    originals = original_results(messages, pairing)
    keep = {"cheap": 0.01, "dear": 0.9, "small": 0.0}

    def texts(kept):
        return {r.tool_use_id: r.text for m in kept for r in m.toolResults or ()}

    by_price = texts(cut_by_policy(messages, pairing, originals, lambda c: keep.get(c.tool_use_id, 0.0),
                                   Policy("judge", "head 300", 1.0)))
    assert by_price["cheap"] == digest("a" * 5000, 300, 0) and by_price["dear"] == "b" * 5000
    assert by_price["small"] == "c" * 300  # nothing to free
    assert all(by_price[c.tool_use_id] == originals[c.tool_use_id] for c in pairing.calls if c.pinned)
    by_length = texts(cut_by_policy(messages, pairing, originals, lambda c: 1.0, Policy("size", "head 500 + tail 500", 4000)))
    assert by_length["cheap"].startswith("a" * 500) and by_length["cheap"].endswith("a" * 500)
    assert len(by_length["cheap"]) < 1100 and len(by_length["dear"]) < 1100


def test_a_re_run_differing_only_in_its_description_is_identical() -> None:
    messages = [
        prompt("go"),
        call("a", "Bash", command="pytest -q", description="run the tests"),
        result("a", "1 failed"),
        call("b", "Bash", command="pytest -q", description="run them again", timeout=60000),
        result("b", "1 passed"),
        call("c", "Bash", command="ls src", description="list"),
        result("c", "a.py"),
        call("d", "Bash", command="ls tests", description="list"),
        result("d", "t.py"),
    ]
    labels = label_outputs(messages)
    assert labels["a"].reproducible and not labels["c"].reproducible
