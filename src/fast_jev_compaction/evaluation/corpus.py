"""Finding and reading the transcripts an evaluation runs over (the I/O edge of this package)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..conversation.messages import SessionMessage
from ..conversation.pairing import pair_tool_calls
from ..conversation.transcript import read_messages
from ..errors import CompactionError

_REPO = Path(__file__).resolve().parents[3]


def default_corpus() -> Path:
    """``shared/corpus`` beside the repository, else ``/work/shared/corpus``."""
    beside = _REPO.parent / "shared" / "corpus"
    return beside if beside.is_dir() else Path("/work/shared/corpus")


def transcript_files(paths: Iterable[str | Path]) -> list[Path]:
    """Every ``*.jsonl`` under the folders given, and the files given, sorted and once each."""
    return list(_found_under(paths))


def _found_under(paths: Iterable[str | Path]) -> dict[Path, Path]:
    """Every transcript file (as :func:`transcript_files`) -> the folder given that holds it, or
    its own folder when the file itself was given."""
    found: dict[Path, Path] = {}
    for raw in paths:
        path = Path(raw)
        for item in sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]:
            found.setdefault(item, path if path.is_dir() else path.parent)
    return found


def session_group(path: Path) -> str:
    """A subagent transcript (``<session>/subagents/agent-*.jsonl``) belongs to its session."""
    if path.parent.name == "subagents":
        return str(path.parent.parent)
    return str(path.with_suffix(""))


def session_origin(group: str, root: Path) -> tuple[str, str]:
    """Where a session comes from, under the folder it was found in: its *source* (the first folder
    below it: one published collection in the corpus) and its *project* (the folder holding the
    session file, as Claude Code keeps one folder of sessions per project)."""
    holder = Path(group).parent
    try:
        parts = holder.relative_to(root).parts
    except ValueError:
        parts = ()
    project = "/".join(parts) if parts else root.name
    return (parts[0] if parts else root.name), project


# The two halves of a set of sessions: defaults are chosen on "tune" and checked on "check".
SPLITS = ("tune", "check")


def session_split(session_id: str) -> str:
    """The half a session belongs to, from a hash of its id (:func:`recorded_session_id`: not its
    folder, so the split is the same wherever the transcripts lie)."""
    return SPLITS[hashlib.sha256(session_id.encode("utf-8")).digest()[0] % 2]


def recorded_session_id(path: Path) -> str | None:
    """The ``sessionId`` of the first record of a JSONL transcript that names one. Claude Code
    writes it on every record, a subagent's records carry their session's, and a user's files
    may all be named alike; None for a file without one (a JSON export, a list of messages)."""
    return _first_recorded(path, "sessionId")


def recorded_start(path: Path) -> str | None:
    """The ``timestamp`` of the first record of a JSONL transcript that has one (ISO 8601 in UTC,
    as Claude Code writes it: such texts sort as their instants do); None for a file without one."""
    return _first_recorded(path, "timestamp")


def _first_recorded(path: Path, name: str) -> str | None:
    """The first non-empty text a record of the transcript at ``path`` holds under ``name``."""
    member = f'"{name}"'
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if member not in line:  # most lines of an export without it: no parse
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                found = record.get(name) if isinstance(record, dict) else None
                if isinstance(found, str) and found:
                    return found
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class Session:
    path: Path
    group: str
    messages: list[SessionMessage]
    source: str = ""  # session_origin
    project: str = ""
    # recorded_session_id, else the group's file name: what the halves and folds are drawn by
    session_id: str = ""


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def load_sessions(paths: Iterable[str | Path]) -> tuple[list[Session], list[Skipped]]:
    """The readable sessions with at least one completed tool call, and why the others were left out."""
    sessions: list[Session] = []
    skipped: list[Skipped] = []
    for path, root in _found_under(paths).items():
        try:
            messages = read_messages(path)
            calls = pair_tool_calls(messages, 0).calls
        except (CompactionError, OSError, ValueError) as exc:
            skipped.append(Skipped(path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            continue
        if len(messages) < 2 or not calls:
            skipped.append(Skipped(path, "no completed tool call"))
            continue
        group = session_group(path)
        session_id = recorded_session_id(path) or Path(group).name
        sessions.append(Session(path, group, messages, *session_origin(group, root), session_id))
    return sessions, skipped
