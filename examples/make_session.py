"""Generate ``session.jsonl``: a small, realistic Claude Code transcript for the README's demo.

It is synthetic (written for this project), in the record format Claude Code 2.x writes:
user/assistant records chained by uuid/parentUuid, one assistant record per content block,
tool results in their own user records, plus bookkeeping records a reader has to skip.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

SESSION = "5f0c7a52-1d2e-4c1b-9a61-3d6f0f6f2a10"
_ids = (uuid.UUID(int=n) for n in range(10_000, 20_000))


def _module(name: str, lines: int) -> str:
    body = [f'"""{name}: inventory helpers."""', "", "from dataclasses import dataclass", ""]
    for n in range(lines):
        body.append(f"def step_{n}(value: int) -> int:")
        body.append(f"    return value * {n + 2} + {n}  # scale step {n}")
        body.append("")
    return "\n".join(f"{i + 1:>6}\u2192{line}" for i, line in enumerate(body))


def build() -> list[dict]:
    records: list[dict] = []
    parent: str | None = None

    def add(kind: str, message: dict, **extra) -> str:
        nonlocal parent
        record_id = str(next(_ids))
        records.append({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/work/inventory",
                        "sessionId": SESSION, "version": "2.1.332", "type": kind, "uuid": record_id,
                        "timestamp": "2026-11-30T10:00:00.000Z", "message": message, **extra})
        parent = record_id
        return record_id

    def user(text: str) -> None:
        add("user", {"role": "user", "content": text})

    def say(text: str) -> None:
        add("assistant", {"id": f"msg_{next(_ids).hex[-12:]}", "type": "message", "role": "assistant",
                          "model": "claude-opus-5-5", "content": [{"type": "text", "text": text}]})

    def call(tool: str, tool_input: dict, output: str, is_error: bool = False) -> None:
        tool_id = f"toolu_{next(_ids).hex[-20:]}"
        add("assistant", {"id": f"msg_{next(_ids).hex[-12:]}", "type": "message", "role": "assistant",
                          "model": "claude-opus-5-5",
                          "content": [{"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input}]})
        add("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                  "content": output, "is_error": is_error}]},
            toolUseResult=output)

    records.append({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}})
    user("The inventory totals are off by one for multi-shelf items. Find the bug and fix it, then run the tests.")
    say("I'll start by looking at the project layout.")
    call("Bash", {"command": "ls -R src tests", "description": "List files"},
         "src:\ninventory\n\nsrc/inventory:\n__init__.py\nshelves.py\ntotals.py\nreport.py\n\ntests:\ntest_totals.py\ntest_report.py")
    call("Read", {"file_path": "/work/inventory/src/inventory/totals.py"}, _module("totals", 60))
    call("Read", {"file_path": "/work/inventory/src/inventory/shelves.py"}, _module("shelves", 80))
    call("Grep", {"pattern": "def total_for", "path": "src"},
         "src/inventory/totals.py:212:def total_for(item, shelves):\nsrc/inventory/report.py:40:    return total_for(item, shelves)")
    call("Bash", {"command": "python -m pytest -q", "description": "Run the tests"},
         "..F.....\n=================================== FAILURES ===================================\n"
         "___________________________ test_multi_shelf_total ___________________________\n"
         "    def test_multi_shelf_total():\n>       assert total_for(item, shelves) == 12\nE       assert 11 == 12\n"
         "tests/test_totals.py:31: AssertionError\n1 failed, 7 passed in 0.21s", True)
    say("The multi-shelf total skips the last shelf: `range(len(shelves) - 1)` should be `range(len(shelves))`.")
    call("Read", {"file_path": "/work/inventory/src/inventory/totals.py", "offset": 200, "limit": 40}, _module("totals", 14))
    call("Edit", {"file_path": "/work/inventory/src/inventory/totals.py",
                  "old_string": "for index in range(len(shelves) - 1):",
                  "new_string": "for index in range(len(shelves)):"},
         "The file /work/inventory/src/inventory/totals.py has been updated.")
    call("Bash", {"command": "python -m pytest -q", "description": "Run the tests"}, "........\n8 passed in 0.19s")
    say("Fixed: `total_for` now counts every shelf; all 8 tests pass.")
    user("Great. Also make the report print totals with thousands separators.")
    call("Read", {"file_path": "/work/inventory/src/inventory/report.py"}, _module("report", 50))
    call("Edit", {"file_path": "/work/inventory/src/inventory/report.py",
                  "old_string": "return f\"{name}: {total}\"", "new_string": "return f\"{name}: {total:,}\""},
         "The file /work/inventory/src/inventory/report.py has been updated.")
    call("Bash", {"command": "python -m pytest -q tests/test_report.py", "description": "Run report tests"},
         "....\n4 passed in 0.08s")
    say("The report now prints totals like `1,234`; the report tests pass.")
    user("Commit both changes.")
    call("Bash", {"command": "git commit -am 'fix: count every shelf; format report totals'", "description": "Commit"},
         "[main 3f2a9c1] fix: count every shelf; format report totals\n 2 files changed, 2 insertions(+), 2 deletions(-)")
    say("Committed as 3f2a9c1.")
    return records


if __name__ == "__main__":
    out = Path(__file__).with_name("session.jsonl")
    out.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in build()),
                   encoding="utf-8")
    print(f"wrote {out}")
