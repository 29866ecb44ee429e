"""Parallel tool calls through a compaction in the real Claude Code 2.1.332.

A model turn with several tool calls is several transcript records; the plugin must hand it
back as one turn with every result right after it, or the engine replaces kept results with
"[Tool result missing due to internal error]". Each case compacts with ``/compact``, resumes
with ``--resume`` for one more turn, and checks every later request against the last one
before the compaction.

Cases: a scripted session whose turns make 2-4 calls at once (a scripted Jev judge mixes keep,
truncate and drop inside each turn), and real corpus sessions with parallel calls, copied into
the test's own HOME (skipped when the corpus is absent).
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from claude_harness import REPO, Claude
from fake_anthropic import FINAL_TEXT, conversation
from fast_jev_compaction.rebuild import truncated_result_text

pytestmark = pytest.mark.e2e

MISSING = "Tool result missing"
INJECTED = ("<system-reminder>", "<local-command-caveat>", "<command-name>", "<local-command-stdout>", "<command-message>")
# Old and new spellings of the three outcomes (keep / truncate / drop).
TRUNCATED = {"drop_result", "truncate"}
DROPPED = {"drop_call", "drop"}
NOTE = re.compile(r"the full output is saved at (.+?); Read it if needed\]$")


def corpus_root() -> Path | None:
    for root in (REPO.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if root.is_dir():
            return root
    return None


CORPUS_SESSIONS = {
    # Claude Code 2.0.42, /init with parallel Reads and Globs; 21 results were lost before the fix.
    "jssoundrecorder": "claude-code-log/test_data/real_projects/-Users-dain-workspace-JSSoundRecorder/7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl",
    # Claude Code 2.1.39, a long session after an earlier /compact, with parallel Bash calls.
    "spotter": "spotter/transcripts/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
}


# --------------------------------------------------------------------------- the request checks


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def results_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["tool_use_id"]: b for m in conversation(body) for b in _blocks(m) if b.get("type") == "tool_result"}


def prose(body: dict[str, Any], role: str) -> list[str]:
    texts = [b.get("text", "") for m in conversation(body) if m["role"] == role for b in _blocks(m) if b.get("type") == "text"]
    return [t for t in texts if t.strip() and not t.lstrip().startswith(INJECTED)]


def same_role_runs(body: dict[str, Any]) -> int:
    roles = [m["role"] for m in conversation(body)]
    return sum(1 for a, b in zip(roles, roles[1:]) if a == b)


def is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(needle == item for item in it) for needle in needles)


def assert_turns_survived(before: dict[str, Any], later: list[dict[str, Any]], actions: dict[str, str]) -> None:
    """Every later request: no placeholder, kept verbatim, cut with a note, pairs whole, prose in order."""
    assert later, "no request after the compaction"
    assert MISSING not in json.dumps(before)
    old = results_of(before)
    for body in later:
        assert MISSING not in json.dumps(body)
        messages = conversation(body)
        # No orphans: a turn's calls are answered by the very next message, and only there.
        for index, message in enumerate(messages):
            uses = {b["id"] for b in _blocks(message) if b.get("type") == "tool_use"}
            following = _blocks(messages[index + 1]) if index + 1 < len(messages) else []
            answered = {b["tool_use_id"] for b in following if b.get("type") == "tool_result"}
            if message["role"] == "assistant" and uses:
                assert uses <= answered, f"message {index}: calls {sorted(uses - answered)} are not answered next"
            for block in _blocks(message):
                if block.get("type") == "tool_result":
                    previous = messages[index - 1] if index else {}
                    assert block["tool_use_id"] in {b.get("id") for b in _blocks(previous)}, f"orphan result in message {index}"
        new = results_of(body)
        for tool_use_id, block in old.items():
            action = actions.get(tool_use_id, "keep")
            if action in DROPPED:
                assert tool_use_id not in new and tool_use_id not in json.dumps(body)
                continue
            assert tool_use_id in new, f"result {tool_use_id} ({action}) is gone"
            was, now = _result_text(block), _result_text(new[tool_use_id])
            if action in TRUNCATED and now != was:
                found = NOTE.search(now)
                assert found, now[-300:]
                saved = Path(found.group(1))
                assert saved.is_file()
                if isinstance(block.get("content"), str):
                    assert saved.read_text(encoding="utf-8") == was
                    assert now == truncated_result_text(was, bool(block.get("is_error")), 300, str(saved))
            else:
                assert now == was, f"kept result {tool_use_id} changed"
        # Prose verbatim and in order (a turn's text fragments are joined as the engine joins them).
        assert "".join(prose(body, "assistant")).startswith("".join(prose(before, "assistant")))
        assert is_subsequence(prose(before, "user"), prose(body, "user"))
        assert same_role_runs(body) <= same_role_runs(before)


def decided_actions(claude: Claude) -> dict[str, str]:
    [(row, decisions)] = claude.decisions()
    assert row.outcome == "replaced", row.reason
    return {d.tool_use_id: d.action for d in decisions}


# --------------------------------------------------------------------------- a scripted Jev judge


class _Judge(BaseHTTPRequestHandler):
    """Answers the Jev protocol by the call's command: seq is dropped, bulk is cut, the rest kept."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        inputs = {c["id"]: c.get("input", "") for e in body["state"]["history"] for c in e.get("tool_calls", []) if isinstance(c, dict)}
        answers = {}
        for name in body["questions"]:
            kind, call = name.split("_", 1)
            text = str(inputs.get(call, ""))
            keep_call, keep_result = (0.1, 0.1) if "seq " in text else (0.9, 0.1) if ("yes " in text or "big.txt" in text) else (0.9, 0.9)
            answers[name] = {"type": "noul", "noul": keep_call if kind == "call" else keep_result}
        data = json.dumps({"answers": answers, "usage": {"input_tokens": 100, "output_tokens": 10}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def judge_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/systemone"
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- cases


def test_turns_of_two_to_four_calls_survive_compact_and_resume(claude: Claude, judge_url: str) -> None:
    settings = claude.settings(judge="jev", apiKey="test", baseUrl=judge_url, preserveRecentMessages=2)
    first = claude.run("do things at once", settings=settings)
    assert first.returncode == 0 and first.result["result"] == FINAL_TEXT
    before = claude.api.message_requests()[-1]
    turns = [m for m in conversation(before) if m["role"] == "assistant"]
    assert [sum(b.get("type") == "tool_use" for b in _blocks(m)) for m in turns] == [2, 3, 4, 2]

    compacted = claude.run("/compact", resume=first.session_id, settings=settings)
    assert compacted.returncode == 0 and compacted.toasts()[0].startswith("kept "), compacted.toasts()
    asked = len(claude.api.message_requests())
    follow = claude.run("what now?", resume=first.session_id, settings=settings)
    assert follow.returncode == 0 and follow.result["is_error"] is False

    actions = decided_actions(claude)
    # One turn holds a kept, a truncated and a dropped call: the mix the rebuild must survive.
    ids = [[b["id"] for b in _blocks(m) if b.get("type") == "tool_use"] for m in turns]
    assert len({actions[i] for i in ids[1]}) == 3, {i: actions[i] for i in ids[1]}
    assert_turns_survived(before, claude.api.message_requests()[asked:], actions)


@pytest.mark.parametrize("name", sorted(CORPUS_SESSIONS))
def test_corpus_sessions_with_parallel_calls_survive_compact_and_resume(claude: Claude, name: str) -> None:
    root = corpus_root()
    if root is None or not (root / CORPUS_SESSIONS[name]).is_file():
        pytest.skip("the transcript corpus (../shared/corpus beside the repository) is not here")
    source = root / CORPUS_SESSIONS[name]
    # Claude Code looks for the session under the folder named after the working directory.
    folder = claude.home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(claude.project))
    folder.mkdir(parents=True)
    shutil.copyfile(source, folder / source.name)
    sid = source.stem

    first = claude.run("first look", resume=sid)
    assert first.returncode == 0, first.stderr[-2000:]
    before = claude.api.message_requests()[-1]
    compacted = claude.run("/compact", resume=sid)
    assert compacted.returncode == 0 and compacted.toasts()[0].startswith("kept "), compacted.toasts()
    asked = len(claude.api.message_requests())
    follow = claude.run("what now?", resume=sid)
    assert follow.returncode == 0 and follow.result["is_error"] is False

    actions = decided_actions(claude)
    assert any(a != "keep" for a in actions.values())
    assert_turns_survived(before, claude.api.message_requests()[asked:], actions)
