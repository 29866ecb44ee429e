"""``fast-jev compact --format transcript`` writes a session the real ``claude --resume`` loads.

A real session runs against the fake API; the CLI compacts its transcript into a new session file
in the same project folder; resuming that session, the model's next request carries exactly the
compacted history.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from claude_harness import RUN_TIMEOUT, Claude, isolated_env
from fake_anthropic import FINAL_TEXT
from fast_jev_compaction.conversation.messages import SessionMessage, parse_messages
from test_claude_plugin import INJECTED, items

pytestmark = pytest.mark.e2e


def expected_items(messages: list[SessionMessage]) -> list[tuple[str, ...]]:
    """What a request built from these messages carries, in the harness's item form."""
    out: list[tuple[str, ...]] = []
    for m in messages:
        if m.role == "assistant":
            if m.text:
                out.append(("assistant_text", m.text))
            out += [("tool_use", u.tool_use_id, json.dumps(u.input, sort_keys=True)) for u in m.toolUses]
        else:
            out += [("tool_result", r.tool_use_id, r.text) for r in m.toolResults or ()]
            if m.text and not m.text.lstrip().startswith(INJECTED):
                out.append(("user_text", m.text))
    return out


def test_a_compacted_transcript_resumes_with_the_compacted_history(claude: Claude) -> None:
    first = claude.run("do the thing")
    assert first.returncode == 0 and first.result["result"] == FINAL_TEXT
    [source] = list((claude.home / ".claude" / "projects").glob(f"*/{first.session_id}.jsonl"))
    resumed_id = str(uuid.uuid4())
    target = source.parent / f"{resumed_id}.jsonl"

    archive = claude.root / "archive"

    def compact(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(source), "--preserve-recent", "2",
             "--archive", str(archive), *extra],
            capture_output=True, text=True, env=claude.env(), cwd=claude.project, timeout=RUN_TIMEOUT,
        )

    written = compact("--format", "transcript", "-o", str(target), "--json")
    assert written.returncode == 0, written.stderr
    summary = json.loads(written.stdout)
    assert summary["truncate"] + summary["drop"] > 0  # something really changed
    compacted = parse_messages(json.loads(compact().stdout))

    follow = claude.run("what now?", resume=resumed_id)
    assert follow.returncode == 0, follow.stderr[-2000:]
    sent = items(claude.api.message_requests()[-1])
    assert sent[-1] == ("user_text", "what now?")
    assert sent[:-1] == expected_items(compacted)
    # The resumed session's own file continues the chain the CLI wrote.
    records: list[dict[str, Any]] = claude.transcript(resumed_id)
    uuids = {r["uuid"] for r in records if "uuid" in r}
    assert [r["message"]["content"] for r in records if r.get("type") == "user"][-1] == "what now?"
    assert all(r.get("parentUuid") is None or r["parentUuid"] in uuids for r in records)


def test_the_readme_install_lines_work_from_a_local_clone(claude_bin: Path, plugin_dir: Path, tmp_path: Path) -> None:
    """README: `claude plugin marketplace add ./fast-jev-compaction`, then install, in a throwaway HOME."""
    (tmp_path / "home").mkdir()
    env = isolated_env(tmp_path / "home")
    # plugin_dir is a copy of the repository's plugin files, marketplace manifest included.
    for argv in (["plugin", "marketplace", "add", f"./{plugin_dir.name}"],
                 ["plugin", "install", "fast-jev-compaction@fast-jev-compaction"]):
        proc = subprocess.run([str(claude_bin), *argv], capture_output=True, text=True, env=env,
                              cwd=plugin_dir.parent, timeout=RUN_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Successfully installed plugin: fast-jev-compaction@fast-jev-compaction" in proc.stdout
