"""A tool's stored record, held as its JSON text until something reads it.

Claude Code keeps, beside the output the model reads, the tool's own account of each call (a
transcript record's ``toolUseResult``, a hook message's ``result``): often the output again, a
file's whole content, a structured patch. The compaction passes it through and reads it only to
find images, so it is kept as the UTF-8 bytes of its ``JSON.stringify`` text, not as Python
objects, and a writer puts that text in place as it is (:func:`json_pieces`): a text holding one
character past Latin-1 costs two or four bytes a character as a ``str``, and on a session whose
records are most of its file the parsed records alone came to 1.3x the transcript (0.65x as
bytes), three times that while a message was written.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator

from ..textutil import js_json


@dataclass(frozen=True, slots=True)
class StoredJSON:
    """One JSON value as the UTF-8 bytes of ``js_json(value)``; equal when the texts are."""

    utf8: bytes

    @classmethod
    def of(cls, value: Any) -> StoredJSON:
        return cls(js_json(value).encode("utf-8"))  # js_json escapes lone surrogates: strict UTF-8

    def value(self) -> Any:
        return json.loads(self.utf8)


def piece_text(piece: str | StoredJSON) -> str:
    """A piece of :func:`json_pieces` as text."""
    return piece if isinstance(piece, str) else piece.utf8.decode("utf-8")


def as_stored(value: Any) -> Any:
    """An object or array as :class:`StoredJSON`; a scalar (or one already stored) as it is."""
    return StoredJSON.of(value) if isinstance(value, (dict, list)) else value


def unstored(value: Any) -> Any:
    """The JSON value itself, for a reader of the record (the media scan, the session-file writer)."""
    return value.value() if isinstance(value, StoredJSON) else value


def json_pieces(value: Any) -> Iterator[str | StoredJSON]:
    """``js_json(value)`` of a value that may hold :class:`StoredJSON`, in pieces: the text
    around each stored value, and the stored value itself for the writer to put in place (its
    bytes, or their text) without making its Python objects again."""
    try:
        # Most messages hold no record: the encoder alone, which stops at the first one it meets.
        whole = js_json(value)
    except TypeError:
        whole = None
    if whole is not None:
        yield whole
        return
    found: list[StoredJSON] = []
    mark = f"\x00{os.urandom(8).hex()}:"  # no real text holds it: each call has its own

    def swapped(item: Any) -> Any:
        if isinstance(item, StoredJSON):
            found.append(item)
            return f"{mark}{len(found) - 1}"
        if isinstance(item, dict):
            return {key: swapped(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [swapped(inner) for inner in item]
        return item

    text = js_json(swapped(value))
    # The marks as js_json writes them: a JSON string, its NUL escaped.
    pattern = re.compile(re.escape(js_json(mark)[:-1]) + r'(\d+)"')
    at = 0
    for match in pattern.finditer(text):
        yield text[at:match.start()]
        yield found[int(match.group(1))]
        at = match.end()
    yield text[at:]
