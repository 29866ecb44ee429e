"""A JSONL transcript read line by line gives exactly what the whole-file reader gives."""

from __future__ import annotations

import json

from fast_jev_compaction.conversation.transcript import load_messages, read_messages
from fast_jev_compaction.conversation.transcript.files import _read_streamed
from fast_jev_compaction.evaluation.synthetic import transcript_lines


def dumped(messages):
    return [m.to_wire() for m in messages]


def readable_corpus(corpus_dir):
    """Each corpus transcript the whole-file reader accepts, with what it reads."""
    for path in sorted(corpus_dir.rglob("*.jsonl")):
        try:
            yield path, load_messages(path.read_text(encoding="utf-8"), source=path.name)
        except ValueError:
            continue


def test_every_corpus_transcript_reads_the_same_streamed(corpus_dir):
    streamed = 0
    for path, whole in readable_corpus(corpus_dir):
        lines = _read_streamed(path)
        if lines is not None:
            streamed += 1
            assert dumped(lines) == dumped(whole), path
    assert streamed >= 20


def test_a_compact_boundary_is_read_streamed_in_two_passes(tmp_path):
    lines = list(transcript_lines(40))
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "content": "Conversation compacted"}
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines[:20] + [json.dumps(boundary)] + lines[20:]) + "\n", encoding="utf-8")
    assert _read_streamed(path) is not None
    whole = load_messages(path.read_text(encoding="utf-8"))
    assert dumped(read_messages(path)) == dumped(whole)
    assert len(whole) < 30


def test_a_generated_session_reads_the_same_streamed(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("\ufeff" + "\n".join(transcript_lines(300)) + "\r\n", encoding="utf-8")
    streamed = _read_streamed(path)
    assert streamed is not None and len(streamed) > 250
    assert dumped(streamed) == dumped(load_messages(path.read_text(encoding="utf-8")))


def test_sidechains_and_boundaries_are_read_in_two_passes(tmp_path, corpus_dir):
    # Every corpus transcript, including those with compact boundaries and sidechain records,
    # reads the same through read_messages as whole; only a preserved segment is read whole.
    bounded = 0
    for path, whole in readable_corpus(corpus_dir):
        assert dumped(read_messages(path)) == dumped(whole), path
        if "compact_boundary" in path.read_text(encoding="utf-8"):
            bounded += _read_streamed(path) is not None
    assert bounded >= 2  # the corpus's compacted sessions without a preserved segment are read streamed
    lines = list(transcript_lines(40))
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "content": "Conversation compacted"}
    side = json.loads(lines[30]) | {"isSidechain": True}
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines[:20] + [json.dumps(boundary)] + lines[20:30] + [json.dumps(side)] + lines[31:]) + "\n", encoding="utf-8")
    streamed = _read_streamed(path)
    assert streamed is not None and dumped(streamed) == dumped(load_messages(path.read_text(encoding="utf-8")))
    kept = {"compactMetadata": {"preservedSegment": {"headUuid": "u00000001", "tailUuid": "u00000002"}}}
    path.write_text("\n".join(lines[:20] + [json.dumps(boundary | kept)] + lines[20:]) + "\n", encoding="utf-8")
    assert _read_streamed(path) is None
    assert dumped(read_messages(path)) == dumped(load_messages(path.read_text(encoding="utf-8")))
