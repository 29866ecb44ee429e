"""The archive's writes and its pruning on real folders: what it trusts of what it finds there."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fast_jev_compaction.decide.archive import archive_path, prune, write_archive
from fast_jev_compaction.private_files import UnsafeFolderError

REPO = Path(__file__).resolve().parents[1]
HOUR = 3600.0


@pytest.mark.parametrize("planted", ["others can write it", "group can write it", "another user owns it", "a symlink"])
def test_write_archive_refuses_a_folder_another_user_could_plant_files_in(tmp_path: Path, planted: str) -> None:
    folder = tmp_path / "out.json.archive"
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    if planted == "a symlink":
        folder.symlink_to(real)
    else:
        folder.mkdir(mode=0o700)
    if planted == "others can write it":
        folder.chmod(0o777)
    elif planted == "group can write it":
        folder.chmod(0o770)
    elif planted == "another user owns it":
        if os.getuid() != 0:
            pytest.skip("only root can give a folder to another user")
        os.chown(folder, 65534, 65534)
    path = archive_path(str(folder), "the output")
    with pytest.raises(UnsafeFolderError):
        write_archive({path: "the output"})
    assert list(real.iterdir()) == [] and not Path(path).is_file()


def test_compact_refuses_an_out_archive_folder_others_can_write(tmp_path: Path) -> None:
    out = tmp_path / "compacted.json"
    folder = tmp_path / "compacted.json.archive"
    folder.mkdir()
    folder.chmod(0o777)
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(REPO / "examples" / "session.jsonl"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and not out.exists() and list(folder.iterdir()) == []
    assert proc.stderr.startswith(f"fast-jev compact: cannot save the cut outputs under {folder}: {folder} is open to other users")
    assert proc.stderr.count("\n") == 1


def test_write_archive_never_trusts_a_hash_named_symlink(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir(mode=0o700)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the output")
    old = time.time() - 10 * HOUR
    os.utime(outside, (old, old))
    path = Path(archive_path(str(folder), "the output"))
    path.symlink_to(outside)
    report = write_archive({str(path): "the output"})
    assert (report.written, report.reused) == (1, 0)
    info = path.lstat()
    assert stat.S_ISREG(info.st_mode) and path.read_text() == "the output"
    # The link's target was neither written nor touched (os.utime did not follow it).
    assert outside.read_text() == "not the output" and outside.stat().st_mtime == pytest.approx(old)


def test_write_archive_refreshes_a_reused_file_without_rewriting_it(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    path = Path(archive_path(str(folder), "the output"))
    write_archive({str(path): "the output"})
    old = time.time() - 10 * HOUR
    os.utime(path, (old, old))
    inode = path.stat().st_ino
    assert write_archive({str(path): "the output"}).reused == 1
    assert path.stat().st_ino == inode and path.stat().st_mtime > old + HOUR


def test_prune_removes_temporary_files_a_killed_write_left(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir(mode=0o700)
    name = Path(archive_path(str(folder), "the output")).name
    stale = folder / f".{name}.4242.tmp"
    fresh = folder / f".{name}.4343.tmp"  # a write still going on in another process
    other = folder / ".notes.txt.4242.tmp"  # not a name the archive makes
    for path in (stale, fresh, other):
        path.write_text("half an output")
    old = time.time() - 2 * HOUR
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    assert prune(folder, max_bytes=None, max_age_days=30) == 1
    assert sorted(p.name for p in folder.iterdir()) == sorted([fresh.name, other.name])


def archived(folder: Path, *ages_and_sizes: tuple[float, int]) -> list[Path]:
    """Archive files of these ages (hours) and sizes (bytes), oldest first as given."""
    paths = []
    now = time.time()
    for number, (hours, size) in enumerate(ages_and_sizes):
        path = Path(archive_path(str(folder), f"output {number}"))
        write_archive({str(path): "x" * size})
        os.utime(path, (now - hours * HOUR, now - hours * HOUR))
        paths.append(path)
    return paths


def test_prune_removes_the_oldest_first_and_stops_once_under_the_limit(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    oldest, older, newer, newest = archived(folder, (4, 100), (3, 100), (2, 100), (1, 100))
    assert prune(folder, max_bytes=250, max_age_days=None) == 2
    assert (oldest.exists(), older.exists(), newer.exists(), newest.exists()) == (False, False, True, True)


def test_prune_never_removes_a_kept_path_even_the_oldest(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    oldest, older, newest = archived(folder, (50 * 24, 100), (40 * 24, 100), (1, 100))
    assert prune(folder, max_bytes=150, max_age_days=30, keep={str(oldest)}) == 2
    assert (oldest.exists(), older.exists(), newest.exists()) == (True, False, False)


def test_prune_removes_what_is_past_its_age_whatever_the_size(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    old, recent = archived(folder, (31 * 24, 10), (29 * 24, 10))
    assert prune(folder, max_bytes=None, max_age_days=30) == 1
    assert (old.exists(), recent.exists()) == (False, True)
