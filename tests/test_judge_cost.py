"""What a compaction costs a remote judge: who is asked (policy.could_cut), and the tokens on the
wire of a ~200k-token session, measured on a real Jev-protocol server on 127.0.0.1."""

from __future__ import annotations

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.decide.decisions import UNDER_CUT
from fast_jev_compaction.decide.policy import MIN_DROP_CHARS, could_cut, cut_over
from fast_jev_compaction.options import CompactOptions
from scripted_asker import ScriptedAsker, pair, per_call, user


def mixed_session() -> list:
    messages = [user("Tidy the handlers")]
    for k in range(24):
        # Every third output is one the budget policy could cut; the others are too small for any cut.
        size = MIN_DROP_CHARS - 100 if k % 3 else 9000
        messages += pair(f"toolu_{k}", "x" * size, "Read", file_path=f"/repo/src/handler_{k}.py")
    return messages + [user("go on")]


def scores(pairing) -> dict[str, tuple[float, float]]:
    # Distinct values so the budget's ranking is the same whoever answers.
    return {call.id: (0.5, (n * 37 % 100) / 100) for n, call in enumerate(pairing.calls)}


class InProcess:
    """An in-process judge answering as the scripted one does: it is never asked over the wire."""

    def __init__(self, by_id: dict[str, tuple[float, float]]) -> None:
        self.by_id = by_id

    def score_calls(self, messages, pairing, goal, only=None):
        return {call.tool_use_id: self.by_id[call.id] for call in pairing.calls}


def test_a_remote_judge_is_asked_only_about_outputs_the_budget_policy_could_cut():
    messages = mixed_session()
    options = CompactOptions(use_rules=False)
    pairing = pair_tool_calls(messages, options.preserve_recent_messages)
    asker = ScriptedAsker(per_call(scores(pairing)), yields=0)
    remote = compact_sync(messages, asker, options)
    total = len(messages)
    cuttable = {call.id for call in pairing.candidates if call.result_chars > cut_over(call, total)}
    assert cuttable and len(cuttable) < len(pairing.candidates)
    assert {name.split("_", 1)[1] for name in asker.asked_names} == cuttable
    assert all(could_cut(call, total, options) == (call.id in cuttable) for call in pairing.candidates)
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


def test_a_200k_token_session_costs_at_most_50k_tokens_and_its_second_pass_a_fifth(tmp_path):
    """Bytes on the wire, counted by a real server on 127.0.0.1 that answers with the embedded
    judge over the Jev protocol; the hook's answer cache (a SQLite file) between the passes."""
    import asyncio

    from fast_jev_compaction.compaction import compact
    from fast_jev_compaction.evaluation.judge_cost import grown_session
    from fast_jev_compaction.jev.client import JevClient
    from fast_jev_compaction.judge.local import LocalJudge
    from fast_jev_compaction.state.answer_cache import open_answer_cache
    from fast_jev_compaction.state.tokens import estimate_tokens
    from jev_fault_server import FaultServer, Reply

    judge = LocalJudge()

    def answer(seen) -> Reply:
        body = seen.json()
        return Reply(body={"model": "jev-test", "answers": judge.answer(body["state"], body["questions"])})

    first, more, size = grown_session(tmp_path)
    assert 750_000 <= size <= 850_000
    assert 150_000 <= sum(estimate_tokens(m.text) + sum(estimate_tokens(r.text) for r in m.toolResults or ()) for m in first) <= 250_000
    cache = open_answer_cache(tmp_path / "data")
    options = CompactOptions()

    def run(url: str, messages: list):
        async def go():
            async with JevClient(base_url=url, retries=0) as client:
                return await compact(messages, client, options, cache)

        return asyncio.run(go())

    with FaultServer(answer) as server:
        pass_one = run(server.url, first)
        one = [estimate_tokens(seen.body.decode()) for seen in server.requests]
        mark = len(server.requests)
        run(server.url, list(pass_one.messages) + more)
        two = [estimate_tokens(seen.body.decode()) for seen in server.requests[mark:]]
    assert one and all(size <= options.max_request_tokens for size in one)
    assert sum(one) <= 50_000, one
    assert two, "the grown session has a new call the budget policy could cut"
    assert sum(two) <= 0.2 * sum(one), (two, one)


def test_bench_reports_the_tokens_of_each_pass(tmp_path):
    """`fast-jev bench --jev-tokens`, the real CLI in a subprocess, against its own serve."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "bench", "--jev-tokens", "--json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    reports = {r["policy"]: r for r in json.loads(out.stdout)["jev_tokens"]}
    assert set(reports) == {"budget", "threshold"}
    budget = [p["tokens"] for p in reports["budget"]["passes"]]
    assert 0 < budget[0] <= 50_000 and 0 < budget[1] <= 0.2 * budget[0] and budget[2] == 0
    # The threshold policy asks about every call the rules leave: more than the budget one.
    assert reports["threshold"]["passes"][0]["asked"] > reports["budget"]["passes"][0]["asked"]


def test_the_hook_remembers_answers_between_two_compactions(tmp_path):
    """The real hook script twice, as the mod runs it, against a real server on 127.0.0.1: the
    second event (the first answer's messages plus new turns) costs at most a fifth."""
    import json
    import subprocess
    import sys

    from fast_jev_compaction.evaluation.judge_cost import grown_session
    from fast_jev_compaction.judge.local import LocalJudge
    from fast_jev_compaction.state.tokens import estimate_tokens
    from jev_fault_server import FaultServer, Reply
    from test_hook_entry import HOOK, event, hook_env

    judge = LocalJudge()

    def answer(seen) -> Reply:
        body = seen.json()
        return Reply(body={"model": "jev-test", "answers": judge.answer(body["state"], body["questions"])})

    first, more, _ = grown_session(tmp_path)
    data = tmp_path / "data"

    def hook(messages: list, url: str) -> dict:
        # The gate is not under test here: the second pass frees little, and replaces anyway.
        options = {"apiKey": "sk-test-key-that-is-long-enough", "baseUrl": url, "minReductionRatio": 0.01}
        body = json.dumps(event(messages, data, options=options)).encode()
        out = subprocess.run([sys.executable, "-I", str(HOOK)], input=body, capture_output=True, env=hook_env(data),
                             cwd=tmp_path, timeout=300)
        assert (out.returncode, out.stderr) == (0, b"")
        return json.loads(out.stdout)

    with FaultServer(answer) as server:
        one = hook([m.to_wire() for m in first], server.url)
        mark = len(server.requests)
        two = hook(one["messages"] + [m.to_wire() for m in more], server.url)
        tokens = [estimate_tokens(seen.body.decode()) for seen in server.requests]
    assert one["action"] == "replace" and two["action"] == "replace", (one.get("reason"), two.get("reason"))
    assert 0 < sum(tokens[:mark]) <= 50_000, tokens
    assert 0 < sum(tokens[mark:]) <= 0.2 * sum(tokens[:mark]), tokens
    assert (data / "answers.sqlite").exists()
