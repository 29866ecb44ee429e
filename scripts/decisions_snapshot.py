"""Compact every corpus transcript (and a few generated ones) at defaults and print what came out.

One JSON line per transcript and judge: each call's decision (tool_use_id, action, reason,
probabilities rounded to 9 places, characters freed), a SHA-256 of the compacted messages and, for
the constant judge, a SHA-256 of every state and question set sent. A speed change must leave the
output byte for byte the same:

    python scripts/decisions_snapshot.py > before.jsonl   # on the old code
    python scripts/decisions_snapshot.py > after.jsonl    # on the new code
    cmp before.jsonl after.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.conversation.transcript import parse_transcript, read_messages
from fast_jev_compaction.errors import CompactionError
from fast_jev_compaction.evaluation.synthetic import transcript_lines
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.state.asker import AskResult
from fast_jev_compaction.textutil import js_json

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


class RecordingAsker:
    """Answers every question with a value derived from its name, and hashes what it was sent."""

    def __init__(self) -> None:
        self.sent = hashlib.sha256()

    async def ask(self, state: Any, questions: Any) -> AskResult:
        self.sent.update(js_json({"state": state, "questions": questions}).encode("utf-8", "surrogatepass"))
        return AskResult({name: {"type": "noul", "noul": _value(name)} for name in questions})


def _value(name: str) -> float:
    return int(hashlib.sha256(name.encode()).hexdigest()[:4], 16) / 0xFFFF


def snapshot(label: str, messages: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for judge in ("local", "recording"):
        asker: Any = LocalJudge() if judge == "local" else RecordingAsker()
        try:
            result = compact_sync(messages, asker)
        except CompactionError as exc:
            rows.append({"file": label, "judge": judge, "error": f"{type(exc).__name__}: {exc}"})
            continue
        wire = json.dumps([m.to_wire() for m in result.messages], ensure_ascii=False, sort_keys=True)
        row = {
            "file": label,
            "judge": judge,
            "decisions": [
                [d.tool_use_id, d.action, d.reason, round(d.keep_call, 9), round(d.keep_result, 9), d.chars_freed]
                for d in result.decisions
            ],
            "output_sha256": hashlib.sha256(wire.encode("utf-8", "surrogatepass")).hexdigest(),
            "stage": result.stats.state_stage,
            "requests": result.stats.requests,
            "state_tokens": result.stats.state_tokens,
            "estimated_tokens": result.stats.estimated_tokens,
            "chars": [result.stats.chars_before, result.stats.chars_after],
            "counts": [result.stats.kept, result.stats.truncated, result.stats.dropped, result.stats.pinned],
        }
        if isinstance(asker, RecordingAsker):
            row["sent_sha256"] = asker.sent.hexdigest()
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--synthetic", type=int, action="append", default=None)
    args = parser.parse_args()
    for path in sorted(Path(args.corpus).rglob("*.jsonl")):
        label = str(path.relative_to(args.corpus))
        try:
            messages = read_messages(path)
        except (CompactionError, OSError, ValueError) as exc:
            print(json.dumps({"file": label, "unreadable": type(exc).__name__}))
            continue
        for row in snapshot(label, messages):
            print(json.dumps(row, sort_keys=True))
    for count in args.synthetic if args.synthetic is not None else [1000, 5000, 12000]:
        messages = parse_transcript(list(transcript_lines(count)))
        for row in snapshot(f"synthetic-{count}", messages):
            print(json.dumps(row, sort_keys=True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
