"""A kept image result through a compaction in the real Claude Code 2.1.332.

The engine rebuilds every tool_result message from its text, so an image a Read returned would
come back empty. The plugin saves the image to its archive and puts a note in its place; the
model's Read of the named file shows the very same image again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import stat
from typing import Any

import pytest

import fake_anthropic
from claude_harness import Claude
from fake_anthropic import Step, conversation

pytestmark = pytest.mark.e2e

PICTURE = "do the picture thing"
AGAIN = "look at the picture again"
# An 8x8 red PNG, as the Read tool returns it (small images go to the model unchanged).
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9hAAAAAElFTkSuQmCC")


def tool_results(body: dict[str, Any]) -> dict[str, Any]:
    return {
        block["tool_use_id"]: block.get("content")
        for message in conversation(body)
        for block in message.get("content") or []
        if isinstance(block, dict) and block.get("type") == "tool_result"
    }


def test_a_kept_image_comes_back_as_a_note_whose_file_read_shows_it(claude: Claude, monkeypatch: pytest.MonkeyPatch) -> None:
    (claude.project / "pic.png").write_bytes(PNG)
    saved = claude.data_dir / "archive" / (hashlib.sha256(PNG).hexdigest()[:32] + ".png")
    # The picture first, then outputs big enough for the compaction to have something to cut.
    monkeypatch.setitem(fake_anthropic.SCENARIOS, PICTURE, [
        Step("Read", {"file_path": "{cwd}/pic.png"}, "Looking at the picture."),
        Step("Bash", {"command": "seq 1 3000", "description": "List numbers"}),
        Step("Bash", {"command": "yes 'filler line of build output' | head -n 600", "description": "Print filler"}),
        Step("Bash", {"command": "seq 5000 7000", "description": "More numbers"}),
        Step("Bash", {"command": "echo hello", "description": "Print hello"}, "Almost done."),
    ])
    monkeypatch.setitem(fake_anthropic.SCENARIOS, AGAIN, [Step("Read", {"file_path": str(saved)}, "Reading the saved picture.")])

    first = claude.run(PICTURE)
    assert first.returncode == 0, first.stderr[-2000:]
    [image_id] = [k for k, v in tool_results(claude.api.message_requests()[-1]).items() if isinstance(v, list) and v and v[0].get("type") == "image"]

    compacted = claude.run("/compact", resume=first.session_id)
    assert compacted.returncode == 0 and compacted.boundaries(), compacted.stderr[-2000:]
    assert saved.read_bytes() == PNG and stat.S_IMODE(saved.stat().st_mode) == 0o600

    before = len(claude.api.message_requests())
    again = claude.run(AGAIN, resume=first.session_id)
    assert again.returncode == 0, again.stderr[-2000:]
    after = claude.api.message_requests()[before:]
    # The compacted history carries the note where the image was, naming the saved file.
    assert tool_results(after[0])[image_id] == (
        f"[fast-jev-compaction saved an image/png ({len(PNG)} bytes) of this output at {saved}; Read it to see it again]"
    )
    # The Read of that file shows the same image.
    reread = [v for k, v in tool_results(after[-1]).items() if k != image_id and isinstance(v, list)]
    images = [block for content in reread for block in content if block.get("type") == "image"]
    assert [base64.b64decode(block["source"]["data"]) for block in images] == [PNG], json.dumps(reread)[:500]
