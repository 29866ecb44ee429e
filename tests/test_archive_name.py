"""An archive file's name is the SHA-256 of the bytes written, whichever implementation computes it."""

from __future__ import annotations

import hashlib

from fast_jev_compaction.archive import NAME_HEX, archive_name, encoded


def test_a_name_is_hashlibs_sha256_of_the_bytes_written() -> None:
    for text in ("", "plain", "naïve ✓ 🚀", "cut mid-emoji \ud83d"):
        assert archive_name(text) == hashlib.sha256(encoded(text)).hexdigest()[:NAME_HEX] + ".txt"
    data = bytes(range(256)) * 1000
    assert archive_name(data, ".png") == hashlib.sha256(data).hexdigest()[:NAME_HEX] + ".png"
