"""A pruned history larger than the host's 4 MiB cap on the hook's output, in the real Claude
Code 2.1.332 (issue 7): the hook hands it over as a file, the mod reads it by ranges, and the
engine installs it with no summary request."""

from __future__ import annotations

import json

import pytest

from claude_harness import Claude
from fake_anthropic import FINAL_TEXT, LONG_PROSE, conversation
from fast_jev_compaction.decide.markers import LEAD_HEAD
from fast_jev_compaction.hook.answer_file import ANSWERS_DIR
from test_repeated_compaction import NAMED_PATH, texts_of

pytestmark = pytest.mark.e2e

# $.process.run's cap on a child's stdout.
STDOUT_CAP = 4 * 1024 * 1024


def test_a_pruned_history_over_the_output_cap_is_installed_whole_without_a_summary(claude: Claude) -> None:
    # About 5 MB of conversation, reported as a sliver of the window (the fake counts escaped JSON).
    claude.api.token_factor = 0.01
    first = claude.run("do the long thing")
    assert first.returncode == 0 and first.result["result"] == FINAL_TEXT, first.stderr[-2000:]
    sid = first.session_id

    compacted = claude.run("/compact", resume=sid)
    assert compacted.returncode == 0, compacted.stderr[-2000:]
    assert [b["trigger"] for b in compacted.boundaries()] == ["manual"], compacted.result
    [toast] = compacted.toasts()
    assert " tool outputs moved to the archive " in toast and toast.endswith(", no summary"), toast
    [(row, decisions)] = claude.decisions()
    assert (row.trigger, row.outcome) == ("manual", "replaced"), row.reason
    assert {d.action for d in decisions} > {"keep"}
    # The answer went through a file, which the mod emptied once read.
    assert "the pruned history went to " in claude.hook_log()
    [answer_file] = (claude.data_dir / ANSWERS_DIR).glob("answer-*.json")
    assert answer_file.stat().st_size == 0

    asked = len(claude.api.message_requests())
    follow = claude.run("what now?", resume=sid)
    assert follow.returncode == 0 and follow.result["is_error"] is False, follow.stderr[-2000:]
    body = claude.api.message_requests()[asked]
    # The session goes on from the pruned history: over the cap, every part's prose whole
    # (its non-ASCII characters read back from their escapes), the lead line and the markers.
    assert len(json.dumps(conversation(body), ensure_ascii=False).encode("utf-8")) > STDOUT_CAP
    texts = texts_of(body)
    for part in ("one", "two", "three", "four"):
        assert sum(text.startswith(f"Part {part}. {LONG_PROSE}") for text in texts) == 1, part
    assert sum(text.count(LEAD_HEAD) for text in texts) == 1
    assert any(NAMED_PATH.search(text) for text in texts)
    assert claude.api.summarizer_requests() == []
    assert not any(r.get("isCompactSummary") for r in claude.transcript(sid))
