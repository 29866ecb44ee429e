"""Engine text that hangs on a message: ``isMeta`` user records, read back from the transcript.

Claude Code does not hand ``isMeta`` user records to ``session.compact`` (the local-command
caveat, a loaded skill's text): it hangs each on the conversation record before it and writes
it back only when that message is answered with its handle, unchanged. Assistant and
tool_result messages go back without one, so the hook must carry that text itself. It reads
the session's transcript, follows each message's parent chain back to the message before it
(so only records on the live chain count), and keeps the text of the ``isMeta`` records met on
the way, keyed by the handle of the message they hang on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ..decide.archive import on_disk

MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024


def transcript_file(plugin_data: str | None, session_id: str | None, env: Mapping[str, str]) -> Path | None:
    """The main session's transcript: ``<config>/projects/<project>/<session>.jsonl``.

    The config folder is the one holding the plugin data folder (``<config>/plugins/data/<id>``),
    else ``CLAUDE_CONFIG_DIR``, else ``~/.claude``; the project folder is found by the session id.
    """
    if not session_id or "/" in session_id or session_id.startswith("."):
        return None
    roots: list[Path] = []
    if plugin_data:
        data = Path(on_disk(plugin_data))
        if data.parent.name == "data" and data.parent.parent.name == "plugins":
            roots.append(data.parent.parent.parent)
    if env.get("CLAUDE_CONFIG_DIR"):
        roots.append(Path(env["CLAUDE_CONFIG_DIR"]))
    if env.get("HOME"):
        roots.append(Path(env["HOME"]) / ".claude")
    for root in roots:
        found = sorted((root / "projects").glob(f"*/{session_id}.jsonl"))
        if found:
            return found[0]
    return None


def _is_message(record: Mapping[str, Any]) -> bool:
    """What the engine turns into a SessionMessage (its own rule)."""
    kind = record.get("type")
    return kind == "assistant" or (kind == "user" and record.get("isMeta") is not True and record.get("isVirtual") is not True)


def _meta_text(record: Mapping[str, Any]) -> str:
    if record.get("type") != "user" or record.get("isMeta") is not True:
        return ""
    message = record.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b["text"] for b in content if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str))
    return ""


# Only a line holding this key can be a meta record (every JSON writer spells a key plainly).
_META_KEY = '"isMeta"'

# Per record only what the walk needs: its parent, whether it is a message, its meta text.
_Record = tuple[Any, bool, str]


def hung_texts(lines: Iterable[str], handles: Iterable[str]) -> dict[str, str]:
    """``isMeta`` text by the handle of the message it hangs on, among the messages ``handles`` names.

    Each message's parent chain is walked back to the previous message; the meta records passed
    on the way hang on that previous message, in chain order. ``lines`` is read twice: most
    transcripts hold no meta text, and then only the lines naming the key are decoded.
    """
    keyed = (line for line in lines if _META_KEY in line)
    if not any(found[1][2].strip() for found in map(_record, keyed) if found is not None):
        return {}
    records = dict(found for found in map(_record, lines) if found is not None)
    return _walk(records, set(handles))


def _record(line: str) -> tuple[str, _Record] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if isinstance(record, dict) and isinstance(record.get("uuid"), str) and not record.get("isSidechain"):
        return record["uuid"], (record.get("parentUuid"), _is_message(record), _meta_text(record))
    return None


def _walk(records: Mapping[str, _Record], wanted: set[str]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for handle in wanted:
        if handle not in records:
            continue
        passed: list[str] = []
        parent = records[handle][0]
        seen = {handle}
        while isinstance(parent, str) and parent in records and parent not in seen:
            seen.add(parent)
            grandparent, is_message, text = records[parent]
            if is_message:
                if parent in wanted and passed:
                    texts[parent] = "".join(reversed(passed))
                break
            if text.strip():
                passed.append(text)
            parent = grandparent
    return texts


class _FileLines:
    """A file's lines, read afresh each time they are iterated."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[str]:
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            yield from fh


def read_hung_texts(path: Path, handles: Iterable[str]) -> dict[str, str]:
    """:func:`hung_texts` of a transcript file; a missing or huge file has none."""
    if path.stat().st_size > MAX_TRANSCRIPT_BYTES:
        return {}
    return hung_texts(_FileLines(path), handles)
