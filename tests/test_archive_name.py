"""An archive file's name is the SHA-256 of the bytes written, whichever implementation computes it."""

from __future__ import annotations

import hashlib

from fast_jev_compaction.decide.archive import archive_name, encoded


def test_a_name_is_hashlibs_sha256_of_the_bytes_written() -> None:
    # 32 hex digits, pinned here: every marker already written names its file by them, so a
    # change of length would leave those markers pointing at nothing.
    for text in ("", "plain", "naïve ✓ 🚀", "cut mid-emoji \ud83d"):
        assert archive_name(text) == hashlib.sha256(encoded(text)).hexdigest()[:32] + ".txt"
    assert archive_name("plain") == "a116c9ed46d6207734a43317d30fd88f.txt"
    data = bytes(range(256)) * 1000
    assert archive_name(data, ".png") == hashlib.sha256(data).hexdigest()[:32] + ".png"
