"""Property tests of the whole flow on generated conversations (upstream §6.4 invariants).

Conversations mix user and assistant texts (some blank), assistant messages with 0-3 tool uses,
user messages carrying results (possibly much later than their call, several at once), calls that
never get a result (pending) and results whose call is absent (orphans). Answers, threshold,
preserve window, head size and archive paths are drawn per example.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fast_jev_compaction.compaction import compact
from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.decide.markers import carries_mark, saved_path
from fast_jev_compaction.decide.rules import RULE_NAMES
from fast_jev_compaction.options import resolve_options
from scripted_asker import ScriptedAsker, dump

_texts = st.one_of(
    st.just(""),
    st.sampled_from([" ", "\n\t ", "ok", "Let me look.", "<system-reminder>x</system-reminder>"]),
    st.text(alphabet="ab \n\u00e9\U0001F600", max_size=40),
)
_outputs = st.one_of(
    st.text(alphabet="xy\n\U0001F600", max_size=30),
    # Lengths just past the truncation margin (head 0 or 300, plus 120) are where a long
    # archive note could outgrow what it replaces.
    st.one_of(
        st.integers(min_value=0, max_value=1500),
        st.integers(min_value=121, max_value=260),
        st.integers(min_value=421, max_value=560),
        st.integers(min_value=1500, max_value=4000),
    ).map(lambda n: ("line of output\n" * (n // 15 + 1))[:n]),
)
_probability = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.floats(min_value=0, max_value=1))


@st.composite
def conversations(draw):
    messages: list[SessionMessage] = []
    waiting: list[tuple[str, str, bool | None]] = []  # calls whose result may still come
    counter = 0
    for _ in range(draw(st.integers(min_value=1, max_value=24))):
        kind = draw(st.sampled_from(["text", "calls", "calls", "results", "results", "results", "orphan"]))
        if kind == "calls":
            uses = []
            for _ in range(draw(st.integers(min_value=0, max_value=3))):
                counter += 1
                tool_use_id = f"toolu_{counter}"
                output = draw(_outputs)
                is_error = draw(st.sampled_from([None, False, True]))
                copy = output if draw(st.booleans()) else None
                tool_input = {"file_path": f"src/f{counter}.ts"}
                if draw(st.booleans()):
                    tool_input["limit"] = draw(st.integers(min_value=1, max_value=500))
                uses.append(ToolUse(tool_use_id=tool_use_id, tool=draw(st.sampled_from(["Read", "Bash", "Grep"])), input=tool_input, text=copy, isError=is_error))
                waiting.append((tool_use_id, output, is_error))
            messages.append(SessionMessage(role="assistant", text=draw(_texts), toolUses=tuple(uses)))
        elif kind == "results" and waiting:
            chosen = draw(st.lists(st.sampled_from(range(len(waiting))), min_size=1, max_size=3, unique=True))
            blocks = [ToolResult(tool_use_id=waiting[k][0], text=waiting[k][1], isError=waiting[k][2]) for k in sorted(chosen)]
            waiting = [w for k, w in enumerate(waiting) if k not in chosen]
            messages.append(SessionMessage(role="user", text=draw(_texts), toolResults=tuple(blocks)))
        elif kind == "orphan":
            counter += 1
            messages.append(SessionMessage(role="user", text=draw(_texts), toolResults=(ToolResult(tool_use_id=f"orphan_{counter}", text=draw(_outputs)),)))
        else:
            messages.append(SessionMessage(role=draw(st.sampled_from(["user", "assistant"])), text=draw(_texts)))
    return messages


DROP_MARK = "[fast-jev-compaction: the "


def strip_markers(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.startswith(DROP_MARK))


def is_subsequence(needles, haystack) -> bool:
    it = iter(haystack)
    return all(any(needle == item for item in it) for needle in needles)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), data=st.data())
def test_compaction_invariants(messages, data):
    preserve = data.draw(st.integers(min_value=0, max_value=8), label="preserve")
    threshold = data.draw(_probability, label="threshold")
    head = data.draw(st.sampled_from([0, 300]) | st.integers(min_value=0, max_value=400), label="head")
    pairing = pair_tool_calls(messages, preserve)
    answers = {}
    for candidate in pairing.candidates:
        answers[f"call_{candidate.id}"] = data.draw(_probability, label=f"call_{candidate.id}")
        answers[f"result_{candidate.id}"] = data.draw(_probability, label=f"result_{candidate.id}")
    archive_dir = data.draw(st.sampled_from([None, "arch", "/a/very/long/archive/folder/" + "p" * 80]), label="archive")
    policy = data.draw(st.sampled_from(["budget", "threshold"]), label="policy")
    use_rules = data.draw(st.booleans(), label="rules")
    before = dump(messages)
    asker = ScriptedAsker(answers)
    options = resolve_options(
        keep_threshold=threshold, preserve_recent_messages=preserve, truncate_head_chars=head,
        digest_chars=data.draw(st.sampled_from([0, 300, 1600]), label="digest"), archive_dir=archive_dir,
        policy=policy, use_rules=use_rules, target_reduction=data.draw(_probability, label="target"),
        keep_floor=data.draw(_probability, label="floor"),
    )
    result = asyncio.run(compact(messages, asker, options))
    out, stats, decisions = result.messages, result.stats, result.decisions

    # The input is never mutated.
    assert dump(messages) == before

    in_use_ids = {u.tool_use_id for m in messages for u in m.toolUses}
    in_result_ids = {r.tool_use_id for m in messages for r in m.toolResults or ()}
    out_use_ids = {u.tool_use_id for m in out for u in m.toolUses}
    out_results = [r for m in out for r in m.toolResults or ()]
    out_result_ids = {r.tool_use_id for r in out_results}

    # No result loses its call: every output result has its call, except results that were
    # already orphans in the input (those are left alone).
    for block in out_results:
        assert block.tool_use_id in out_use_ids or block.tool_use_id not in in_use_ids
    # No call loses its result unless the call went too.
    for tool_use_id in out_use_ids & in_result_ids:
        assert tool_use_id in out_result_ids
    # Orphans and pending calls are never touched.
    assert {r for r in in_result_ids if r not in in_use_ids} <= out_result_ids
    assert {p.tool_use_id for p in pairing.pending} <= out_use_ids

    # Texts are never edited: once the marker lines of dropped calls are set aside, the output's
    # (role, text) pairs are an ordered subsequence of the input's.
    prose = [(m.role, strip_markers(m.text)) for m in out]
    assert is_subsequence(prose, [(m.role, m.text) for m in messages])
    # Every dropped call left exactly one marker line, in an assistant message.
    dropped_calls = [d for d in decisions if d.action == "drop"]
    marker_lines = [line for m in out for line in m.text.split("\n") if line.startswith(DROP_MARK)]
    assert len(marker_lines) == len(dropped_calls)
    assert all(m.role == "assistant" for m in out if DROP_MARK in m.text and m.text not in {t for _, t in prose})

    # Identity: the first message, the preserved window and every untouched message.
    if messages:
        assert out[0] is messages[0]
    window = min(preserve, len(messages))
    if window:
        assert all(a is b for a, b in zip(out[-window:], messages[-window:]))
    pinned_ids = {c.tool_use_id for c in pairing.calls if c.pinned}
    affected = {d.tool_use_id for d in decisions if d.action != "keep" and d.tool_use_id not in pinned_ids}
    out_ids = {id(m) for m in out}
    for message in messages:
        ids = {u.tool_use_id for u in message.toolUses} | {r.tool_use_id for r in message.toolResults or ()}
        if not ids & affected:
            assert id(message) in out_ids
    # Kept and pinned calls keep their very blocks.
    out_blocks = {id(b) for m in out for b in [*m.toolUses, *(m.toolResults or ())]}
    kept_ids = {d.tool_use_id for d in decisions if d.action == "keep"}
    for message in messages:
        for block in [*message.toolUses, *(message.toolResults or ())]:
            if block.tool_use_id in kept_ids:
                assert id(block) in out_blocks

    # Counts.
    assert len(decisions) == stats.calls == len(pairing.calls)
    assert stats.kept + stats.truncated + stats.dropped + stats.pinned == stats.calls
    assert stats.pinned == len(pinned_ids)
    # The judge is asked about every call no rule settled, and only those.
    ruled = {d.id for d in decisions if d.reason in RULE_NAMES}
    judged = {d.id for d in decisions if d.reason in ("threshold", "budget")}
    asked = {name.split("_", 1)[1] for name in asker.asked_names}
    assert judged <= asked and not asked & ruled and set(asker.asked_names) <= set(answers)
    assert len(asker.asked_names) == len(set(asker.asked_names))
    assert stats.requests == len(asker.requests)
    assert use_rules or not ruled

    # Sizes. A message is removed exactly when its text is blank, it had no tool_use, and every
    # result it held belonged to a dropped call (a dropped call's own message keeps its marker);
    # its (whitespace) text then leaves with it, which is the only change not counted in chars_freed.
    dropped = {d.tool_use_id for d in decisions if d.action == "drop" and d.tool_use_id not in pinned_ids}
    removed = [
        m
        for m in messages
        if not m.text.strip()
        and m.toolResults
        and not m.toolUses
        and all(b.tool_use_id in dropped for b in m.toolResults)
    ]
    assert stats.messages_after == len(out) == len(messages) - len(removed)
    assert stats.chars_before == sum(message_chars(m) for m in messages)
    assert stats.chars_after == sum(message_chars(m) for m in out)
    assert all(d.chars_freed >= 0 or d.action == "drop" for d in decisions)
    # Each marker line counts its separating newline; the first line of an empty text has none.
    freed = stats.chars_before - stats.chars_after - sum(len(m.text) for m in removed)
    assert 0 <= freed - sum(d.chars_freed for d in decisions) <= len(dropped_calls)

    # A cut output is shorter than the original, keeps its opening, and says where the rest is.
    originals = {r.tool_use_id: r.text for m in messages for r in m.toolResults or ()}
    paths = {d.tool_use_id: d.archive_path for d in decisions}
    for block in out_results:
        original = originals[block.tool_use_id]
        if block.text != original:
            assert len(block.text) < len(original)
            assert block.text.startswith(original[: min(head, 1)]) or head == 0
            assert carries_mark(block.text)
            assert (saved_path(block.text) is not None) == (archive_dir is not None)
            if archive_dir is not None:
                assert saved_path(block.text) == paths[block.tool_use_id]
                assert result.archive[paths[block.tool_use_id]] == original
