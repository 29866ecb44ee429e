"""Answers remembered across passes (answer_cache.py), measured on a real Jev-protocol server."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys

from fast_jev_compaction.compaction import compact, compact_sync
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.jev.client import JevClient
from fast_jev_compaction.options import CompactOptions
from fast_jev_compaction.state.answer_cache import (
    MemoryAnswerCache,
    SqliteAnswerCache,
    answer_key,
    judge_scope,
    open_answer_cache,
    situations,
)
from fast_jev_compaction.state.tokens import estimate_tokens
from jev_fault_server import FaultServer, Reply, Seen, answers_body
from scripted_asker import ScriptedAsker, pair, user

# Past policy.cut_over: outputs the budget policy could cut, so the judge is asked.
OUTPUT = "def handler(event):\n    return process(event)\n" * 150


def session(first: int, count: int) -> list:
    messages = []
    for k in range(first, first + count):
        tool, field = ("Read", "file_path") if k % 2 else ("Bash", "command")
        value = f"/repo/src/handler_{k}.py" if k % 2 else f"python -m pytest tests/test_handler_{k}.py"
        messages += pair(f"toolu_{k}", f"{OUTPUT}# {k}\n", tool, **{field: value})
    return messages


def answer(seen: Seen) -> Reply:
    # Cut every fourth call, keep the others: both outcomes reach the second pass (the rules
    # settle the test runs; the reads, every second call, are asked).
    names = list(seen.json()["questions"])
    body = answers_body(names)
    for name in names:
        body["answers"][name]["noul"] = 0.1 if int(name.rsplit("t", 1)[1]) % 4 == 0 else 0.9
    return Reply(body=body)


def run_pass(url: str, messages: list, cache) -> object:
    async def go():
        client = JevClient(api_key="test-key", base_url=url, retries=0)
        async with client:
            # A floor keeps the outputs valued 0.9, so both outcomes reach the second pass.
            return await compact(messages, client, CompactOptions(keep_floor=0.5), cache)

    return asyncio.run(go())


def wire(server: FaultServer, start: int) -> tuple[int, int]:
    """Questions asked and estimated body tokens of the requests from ``start`` on."""
    seen = server.requests[start:]
    return sum(len(s.json()["questions"]) for s in seen), sum(estimate_tokens(s.body.decode()) for s in seen)


def test_second_pass_asks_at_most_a_fifth_of_the_first(tmp_path):
    first_session = [user("Please refactor the handlers")] + session(0, 120) + [user("keep going")]
    cache = open_answer_cache(tmp_path / "data")
    with FaultServer(answer) as server:
        first = run_pass(server.url, first_session, cache)
        asked_first, tokens_first = wire(server, 0)
        mark = len(server.requests)
        # The session goes on: the first pass's output plus a few new calls.
        grown = list(first.messages) + session(500, 4) + [user("and now the docs")]
        second = run_pass(server.url, grown, cache)
        asked_second, tokens_second = wire(server, mark)
    assert asked_first > 100
    assert 0 < asked_second <= 0.2 * asked_first
    # Each request still carries a whole state, so tokens fall less than questions on a session
    # this small (one state); on sessions that need several requests they fall with the questions.
    assert tokens_second <= 0.5 * tokens_first
    assert second.stats.remembered > 20
    # The remembered answers decide like fresh ones: what pass one kept, pass two keeps.
    kept_first = {d.tool_use_id for d in first.decisions if d.action == "keep" and d.reason != "pinned"}
    second_by_id = {d.tool_use_id: d for d in second.decisions}
    assert all(second_by_id[t].action == "keep" for t in kept_first if t in second_by_id)


def test_a_changed_output_is_asked_again():
    messages = [user("go")] + session(0, 20) + [user("done")]
    cache = MemoryAnswerCache()
    asker = ScriptedAsker(0.9, yields=0)
    compact_sync(messages, asker, CompactOptions(use_rules=False), cache)
    first = len(asker.asked_names)
    changed = list(messages)
    # Same tool_use_id, new output: a new situation.
    changed[1:3] = pair("toolu_0", "a different output\n" * 400, "Bash", command="python -m pytest tests/test_handler_0.py")
    compact_sync(changed, asker, CompactOptions(use_rules=False), cache)
    assert asker.asked_names[first:] == ["call_t1", "result_t1"]


def test_keys_depend_on_call_output_and_judge():
    messages = session(0, 1)
    call = pair_tool_calls(messages, 0).calls[0]
    key = answer_key(call, "out", "JevClient")
    assert key.startswith("toolu_0:")
    assert key != answer_key(call, "out2", "JevClient")
    assert key != answer_key(call, "out", "LocalJudge")
    assert key == answer_key(call, "out", "JevClient")


def test_the_file_is_private_and_shared_by_concurrent_processes(tmp_path):
    folder = tmp_path / "data"
    script = (
        "import sys\n"
        "from fast_jev_compaction.state.answer_cache import open_answer_cache\n"
        "cache = open_answer_cache(sys.argv[1])\n"
        "for n in range(50):\n"
        "    cache.put({f'{sys.argv[2]}-{n}': (0.5, 0.25)})\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(folder), name], cwd=tmp_path)
        for name in ("a", "b", "c")
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    cache = open_answer_cache(folder)
    keys = [f"{name}-{n}" for name in "abc" for n in range(50)]
    assert cache.get(keys) == {key: (0.5, 0.25) for key in keys}
    assert stat.S_IMODE(os.stat(folder / "answers.sqlite").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_oldest_rows_go_past_the_limit(tmp_path):
    cache = SqliteAnswerCache(tmp_path / "a.sqlite", max_rows=3)
    for n in range(5):
        cache.put({f"k{n}": (1.0, 0.0)})
    assert sorted(cache.get([f"k{n}" for n in range(5)])) == ["k2", "k3", "k4"]


def test_keys_follow_the_situation_of_a_call():
    # A read, then an edit of the same file: the read is in a new situation, the edit is not.
    read = session(0, 2)[2:]
    messages = read + pair("toolu_e", "ok", "Edit", file_path="/repo/src/handler_1.py", old_string="a", new_string="b")
    calls = pair_tool_calls(messages, 0).calls
    assert situations(calls[:1]) == {"toolu_1": ""}
    assert situations(calls) == {"toolu_1": "edited", "toolu_e": ""}


def test_the_scope_names_the_endpoint_and_model_through_a_wrapper():
    from fast_jev_compaction.hook.tally import Tally

    one = JevClient(base_url="http://127.0.0.1:1/v1/systemone", model="jev-a")
    other = JevClient(base_url="http://127.0.0.1:2/v1/systemone", model="jev-a")
    watched = Tally().watch(one)
    assert judge_scope(watched) == judge_scope(one) == one.cache_scope
    assert "jev-a" in judge_scope(one) and "127.0.0.1:1" in judge_scope(one)
    assert judge_scope(other) != judge_scope(one)
    assert judge_scope(JevClient(base_url="http://127.0.0.1:1/v1/systemone", model="jev-b")) != judge_scope(one)
    assert judge_scope(ScriptedAsker()) == "scripted_asker.ScriptedAsker"


def test_sqlite_answer_cache_get_returns_every_answer_however_many_are_asked(tmp_path):
    cache = SqliteAnswerCache(tmp_path / "answers.sqlite")
    answers = {f"toolu_{n}:k": (n / 3000, 1 - n / 3000) for n in range(2500)}  # past one statement's 900
    cache.put(answers)
    assert cache.get([*answers, "toolu_unknown:k"]) == answers
    cache.close()


def test_sqlite_answer_cache_get_forgets_values_no_judge_gives(tmp_path):
    path = tmp_path / "answers.sqlite"
    cache = SqliteAnswerCache(path)
    cache.put({"good:k": (0.25, 0.75), "text:k": (0.1, 0.1), "big:k": (0.1, 0.1), "blob:k": (0.1, 0.1)})
    with sqlite3.connect(path) as db:  # SQLite keeps whatever type it is given
        db.execute("UPDATE answers SET keep_call = 'high' WHERE key = 'text:k'")
        db.execute("UPDATE answers SET keep_result = 7.5 WHERE key = 'big:k'")
        db.execute("UPDATE answers SET keep_call = x'00' WHERE key = 'blob:k'")
    # A tampered answer is asked again, not handed to the policy (where it would fail the pass).
    assert cache.get(["good:k", "text:k", "big:k", "blob:k"]) == {"good:k": (0.25, 0.75)}
    cache.close()


def test_answer_cache_asks_again_when_compact_instructions_change_the_goal():
    """`/compact <instructions>` never reached the judge for calls it had judged already."""
    from fast_jev_compaction.state.goal import compaction_goal

    messages = [user("Please refactor the handlers")] + session(0, 20) + [user("keep going")]
    cache = MemoryAnswerCache()
    asker = ScriptedAsker(0.9, yields=0)

    def asked(instructions: str | None) -> int:
        before = len(asker.asked_names)
        compact_sync(messages, asker, CompactOptions(use_rules=False, goal=compaction_goal(messages, None, instructions)), cache)
        return len(asker.asked_names) - before

    first = asked(None)
    assert first > 0
    assert asked(None) == 0  # the same goal: every answer remembered
    assert asked("focus on the payment handlers") == first  # a new focus: asked again
    assert asked("focus on the payment handlers") == 0
    assert asked(None) == 0  # back to the recent prompts: the first answers still stand


def test_answer_key_holds_the_goal():
    call = pair_tool_calls(session(0, 1), 0).calls[0]
    assert answer_key(call, "out", "JevClient", "", "goal a") != answer_key(call, "out", "JevClient", "", "goal b")
    assert answer_key(call, "out", "JevClient") == answer_key(call, "out", "JevClient", "", "")
