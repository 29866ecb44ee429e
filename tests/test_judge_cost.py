"""What a compaction costs a remote judge: who is asked (policy.could_cut), and the tokens on the
wire of a ~200k-token session, measured on a real Jev-protocol server on 127.0.0.1."""

from __future__ import annotations

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.decisions import UNDER_CUT
from fast_jev_compaction.options import CompactOptions
from fast_jev_compaction.pairing import pair_tool_calls
from fast_jev_compaction.policy import MIN_CUT_CHARS, could_cut
from scripted_asker import ScriptedAsker, pair, per_call, user


def mixed_session() -> list:
    messages = [user("Tidy the handlers")]
    for k in range(24):
        size = 400 if k % 3 else 9000  # every third output is one the budget policy could cut
        messages += pair(f"toolu_{k}", "x" * size, "Read", file_path=f"/repo/src/handler_{k}.py")
    return messages + [user("go on")]


def scores(pairing) -> dict[str, tuple[float, float]]:
    # Distinct values so the budget's ranking is the same whoever answers.
    return {call.id: (0.5, (n * 37 % 100) / 100) for n, call in enumerate(pairing.calls)}


class InProcess:
    """An in-process judge answering as the scripted one does: it is never asked over the wire."""

    def __init__(self, by_id: dict[str, tuple[float, float]]) -> None:
        self.by_id = by_id

    def score_calls(self, messages, pairing, goal):
        return {call.tool_use_id: self.by_id[call.id] for call in pairing.calls}


def test_a_remote_judge_is_asked_only_about_outputs_the_budget_policy_could_cut():
    messages = mixed_session()
    options = CompactOptions(use_rules=False)
    pairing = pair_tool_calls(messages, options.preserve_recent_messages)
    asker = ScriptedAsker(per_call(scores(pairing)), yields=0)
    remote = compact_sync(messages, asker, options)
    cuttable = {call.id for call in pairing.candidates if call.result_chars > MIN_CUT_CHARS}
    assert cuttable and len(cuttable) < len(pairing.candidates)
    assert {name.split("_", 1)[1] for name in asker.asked_names} == cuttable
    assert all(could_cut(call) == (call.id in cuttable) for call in pairing.candidates)
    under = {d.id for d in remote.decisions if d.reason == UNDER_CUT}
    assert under == {call.id for call in pairing.candidates} - cuttable
    assert all(d.action == "keep" for d in remote.decisions if d.reason == UNDER_CUT)
    # The same outcome as a judge that scored every call.
    local = compact_sync(messages, InProcess(scores(pairing)), options)
    assert [d.action for d in remote.decisions] == [d.action for d in local.decisions]
    assert not any(d.reason == UNDER_CUT for d in local.decisions)


def test_the_threshold_policy_asks_about_every_call():
    messages = mixed_session()
    options = CompactOptions(use_rules=False, policy="threshold")
    asker = ScriptedAsker(0.9, yields=0)
    compact_sync(messages, asker, options)
    candidates = pair_tool_calls(messages, options.preserve_recent_messages).candidates
    assert len(asker.asked_names) == 2 * len(candidates)
