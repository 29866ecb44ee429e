"""The judge's answers remembered across passes, per call and per situation.

A key is the call's tool_use_id plus a hash of the judge (its endpoint and model), the call's
tool, input and output, its situation: what later calls did to its file or command (edited,
read again, run again), and the goal the user gave (``compaction.given_goal``). A later pass
asks only about calls it has not seen, or whose output, situation or given goal changed since
(a result cut by an earlier pass is a new situation, and the rules settle those anyway).
``SqliteAnswerCache`` is the private file the hook keeps in the plugin data folder;
``MemoryAnswerCache`` serves library callers that compact the same conversation more than once
in one process.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Mapping, Protocol, Sequence

from ..conversation.lexicon import EDIT, READ, call_shape
from ..conversation.pairing import ToolCall
from ..textutil import escape_unwritable, js_json

Scores = tuple[float, float]
FILE_NAME = "answers.sqlite"
# Rows kept; the oldest go first. A row is ~150 bytes, so the file stays a few MB.
MAX_ROWS = 50_000


class AnswerCache(Protocol):
    """Remembered ``(keep_call, keep_result)`` by key."""

    def get(self, keys: Iterable[str]) -> dict[str, Scores]: ...

    def put(self, answers: Mapping[str, Scores]) -> None: ...


def judge_scope(asker: object) -> str:
    """Whose answers these are: the asker's ``cache_scope`` (a remote judge names its provider,
    endpoint and model), else its class; a wrapper that passes attributes through (the hook's
    tally) keeps the scope of the judge it wraps."""
    scope = getattr(asker, "cache_scope", None)
    if isinstance(scope, str) and scope:
        return scope
    kind = type(asker)
    return f"{kind.__module__}.{kind.__qualname__}"


def situations(calls: Sequence[ToolCall]) -> dict[str, str]:
    """What later calls did to each call's file or command, by tool_use_id ("" when nothing):
    the same call and output in a new situation is a new question."""
    found: dict[str, str] = {}
    later_files: dict[str, set[str]] = {}
    later_keys: set[str] = set()
    for call in reversed(calls):
        shape = call_shape(call.tool, call.input)
        marks = sorted(later_files.get(shape.file, ())) if shape.file else []
        if shape.rerun_key and shape.rerun_key in later_keys:
            marks.append("rerun")
        found[call.tool_use_id] = ",".join(marks)
        if shape.file and shape.kind in (READ, EDIT):
            later_files.setdefault(shape.file, set()).add("edited" if shape.kind == EDIT else "read")
        if shape.rerun_key:
            later_keys.add(shape.rerun_key)
    return found


def answer_key(call: ToolCall, output: str, scope: str = "", situation: str = "", goal: str = "") -> str:
    """``tool_use_id:hash``; ``scope`` (:func:`judge_scope`) keeps two judges' answers apart,
    ``goal`` the answers to two goals."""
    try:
        rendered = js_json(call.input)
    except (TypeError, ValueError):
        rendered = repr(call.input)
    digest = hashlib.sha256("\0".join((scope, call.tool, rendered, output, situation, goal)).encode("utf-8", "replace"))
    # The id as SQLite can store it: a lone surrogate or a NUL would fail the lookup.
    return f"{escape_unwritable(call.tool_use_id)}:{digest.hexdigest()[:32]}"


class MemoryAnswerCache:
    def __init__(self) -> None:
        self.answers: dict[str, Scores] = {}

    def get(self, keys: Iterable[str]) -> dict[str, Scores]:
        return {key: self.answers[key] for key in keys if key in self.answers}

    def put(self, answers: Mapping[str, Scores]) -> None:
        self.answers.update(answers)


class SqliteAnswerCache:
    """A private SQLite file (0600 in a 0700 folder); concurrent hooks share it through WAL."""

    def __init__(self, path: str | Path, max_rows: int = MAX_ROWS) -> None:
        self.path = Path(path)
        self.max_rows = max_rows
        self.last_error = ""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            # Created private before SQLite opens it, so no moment exists where it is readable.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self._db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, keep_call REAL NOT NULL,"
            " keep_result REAL NOT NULL, at REAL NOT NULL)"
        )

    def get(self, keys: Iterable[str]) -> dict[str, Scores]:
        """Remembered answers; a locked or broken file remembers nothing (``last_error`` says why)."""
        wanted = list(keys)
        found: dict[str, Scores] = {}
        try:
            # SQLite binds at most 999 parameters per statement on older builds.
            for start in range(0, len(wanted), 900):
                chunk = wanted[start : start + 900]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, keep_call, keep_result FROM answers WHERE key IN ({marks})", chunk)
                # SQLite keeps any type in any column: a value no judge gives (a tampered file) is
                # asked again rather than handed to the policy.
                found.update((key, (call, result)) for key, call, result in rows if _score(call) and _score(result))
        except sqlite3.Error as exc:
            self.last_error = str(exc)
        return found

    def put(self, answers: Mapping[str, Scores]) -> None:
        if not answers:
            return
        try:
            self._write(answers)
        except sqlite3.Error as exc:
            self.last_error = str(exc)

    def _write(self, answers: Mapping[str, Scores]) -> None:
        now = time.time()
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)",
                [(key, call, result, now) for key, (call, result) in answers.items()],
            )
            self._db.execute(
                "DELETE FROM answers WHERE key IN (SELECT key FROM answers ORDER BY at DESC LIMIT -1 OFFSET ?)",
                (self.max_rows,),
            )

    def close(self) -> None:
        self._db.close()


def _score(value: object) -> bool:
    return type(value) is float and 0.0 <= value <= 1.0 or type(value) is int and value in (0, 1)


def open_answer_cache(folder: str | Path) -> SqliteAnswerCache:
    return SqliteAnswerCache(Path(folder) / FILE_NAME)
