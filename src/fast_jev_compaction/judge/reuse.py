"""Where a tool output comes back: its distinctive snippets and the later messages that repeat them.

A snippet is a distinctive 8-word shingle of an output, or an id-like token of 24 characters or
more (a hash, an id, a path, a URL). An output is *reused* at message ``m`` when one of its
snippets appears in ``m``'s assistant text or in one of ``m``'s tool inputs (an Edit's
``old_string``, a Read of a path the output listed). This is kompact's behavioural label; the
feature extraction uses it on the past ("reused so far") and the evaluation on the future.

A snippet already present in a prompt, an assistant text or a tool input *before* the output
arrived is not distinctive: the output did not bring it into the conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate, compress
from typing import Any, Container, Iterable, Iterator, Sequence

from ..conversation.messages import SessionMessage

SHINGLE_WORDS = 8
ID_MIN_CHARS = 24
# A shingle must carry some content: "0 0 0 0 0 0 0 0" or "a b c d e f g h" come back by chance.
_SHINGLE_MIN_CHARS = 30
_SHINGLE_MIN_LONG_WORDS = 3

# Read results number their lines ("    12→code" or "    12\tcode"); the numbers are not content.
_LINE_NUMBER = re.compile(r"^[ \t]*\d+(?:→|\t)", re.MULTILINE)
_WORD = re.compile(r"\w+")
_URL = re.compile(r"https?://[^\s\"'<>()\[\]{}`]+")
_ID = re.compile(r"[\w\-./~@+=%]{" + str(ID_MIN_CHARS) + ",}")
_ID_TRIM = ".,-/"
_ALNUM = re.compile(r"[A-Za-z0-9]")
_ID_MARK = re.compile(r"[0-9/_\-]")


# Unless a word character lies outside ASCII, both token patterns reduce to fixed ASCII sets:
# every other character mapped to a space (non-ASCII ones through "?"), a split finds the same
# runs, in C, several times faster than the patterns.
_ASCII_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ONLY_WORDS = bytes(c if chr(c) in _ASCII_WORD_CHARS else 32 for c in range(256))
_ONLY_IDS = bytes(c if chr(c) in _ASCII_WORD_CHARS or chr(c) in "-./~@+=%" else 32 for c in range(256))
_ASCII_RUNS = re.compile(r"[\x00-\x7f]+")
_LONG_ENOUGH = (ID_MIN_CHARS - 1).__lt__


def ascii_words(text: str) -> bool:
    """Whether every word character of ``text`` (``\\w``: alphanumeric or ``_``) is ASCII, so
    the byte tables below see all its words and ids. Removing Read line numbers (ASCII digits,
    blanks and "→") does not change it: a text's tokens share one answer."""
    return text.isascii() or not any(c.isalnum() for c in set(_ASCII_RUNS.sub("", text)))


def _ascii_runs(text: str, table: bytes, lower: bool = False, plain: bool | None = None) -> list[str] | None:
    """The runs of ``table``'s characters in ``text`` (in ``text.lower()`` with ``lower``); None
    when a non-ASCII character is a word character (``\\w``: alphanumeric or ``_``), which the
    table cannot see. ``plain``: :func:`ascii_words` of ``text``, when the caller has it.

    Lower-casing the ASCII bytes gives the runs lower-casing the text would: a non-ASCII
    character that is not a word character lower-cases to one non-ASCII character, never to an
    ASCII one or to several (all of them checked), and it is a "?" either way. Bytes lower-case
    many times faster than a text holding non-ASCII characters.
    """
    if not (ascii_words(text) if plain is None else plain):
        return None
    encoded = text.encode("ascii", "replace")
    return (encoded.lower() if lower else encoded).translate(table).decode("ascii").split()


def normalized_words(text: str, plain: bool | None = None) -> list[str]:
    """Lower-cased word tokens, with Read line numbers removed (``plain``: :func:`ascii_words`
    of ``text``, when known)."""
    # A line number ends in "→" or a tab: without either there is none to remove.
    if "→" in text or "\t" in text:
        text = _LINE_NUMBER.sub("", text)
    words = _ascii_runs(text, _ONLY_WORDS, lower=True, plain=plain)
    return _WORD.findall(text.lower()) if words is None else words


def _windows(words: list[str], heads: Container[str] | None = None) -> set[str]:
    """The distinctive 8-word windows of ``words``; with ``heads``, only those whose first word
    is in it (the others cannot match an indexed snippet)."""
    if len(words) < SHINGLE_WORDS:
        return set()
    # running sums make each window's checks O(1); each window is a slice of the joined words,
    # word k starting at chars[k] + k
    lengths = [len(word) for word in words]
    chars = list(accumulate(lengths, initial=0))
    long_words = list(accumulate((n >= 3 for n in lengths), initial=0))
    joined = " ".join(words)
    min_chars = _SHINGLE_MIN_CHARS - (SHINGLE_WORDS - 1)  # the spaces count too
    last = SHINGLE_WORDS - 1
    return {
        joined[chars[start] + start : chars[start + SHINGLE_WORDS] + start + last]
        for start in range(len(words) - last)
        if (heads is None or words[start] in heads)
        and chars[start + SHINGLE_WORDS] - chars[start] >= min_chars
        and long_words[start + SHINGLE_WORDS] - long_words[start] >= _SHINGLE_MIN_LONG_WORDS
    }


def shingles(text: str) -> set[str]:
    """The 8-word windows of ``text`` that carry enough content to be distinctive."""
    return _windows(normalized_words(text))


def long_ids(text: str, plain: bool | None = None) -> set[str]:
    """Tokens of 24+ characters that name something: hashes, ids, paths, URLs (``plain``:
    :func:`ascii_words` of ``text``, when known)."""
    found: set[str] = set()
    if len(text) < ID_MIN_CHARS:  # most tool inputs' strings: a path, a flag, a description
        return found
    for match in _URL.finditer(text):
        token = match.group(0).rstrip(".,;:")
        if len(token) >= ID_MIN_CHARS:
            found.add(token)
    runs = _ascii_runs(text, _ONLY_IDS, plain=plain)
    # compress/map keep the length filter in C: most runs are short words
    long_runs = _ID.findall(text) if runs is None else compress(runs, map(_LONG_ENOUGH, map(len, runs)))
    for token in long_runs:
        token = token.strip(_ID_TRIM)
        # a long plain word names nothing; a rule of dashes or dots neither
        if len(token) >= ID_MIN_CHARS and _ID_MARK.search(token) and len(_ALNUM.findall(token)) >= 8:
            found.add(token)
    return found


def snippets(text: str) -> set[str]:
    """Shingles and long ids together (a shingle has spaces, an id has none: no collisions)."""
    return shingles(text) | long_ids(text)


def string_values(value: Any) -> Iterator[str]:
    """Every string inside a tool input, keys excluded."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from string_values(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from string_values(item)


def channel_texts(message: SessionMessage) -> list[str]:
    """The texts of a message through which an output can be reused: assistant text, tool inputs."""
    texts = [message.text] if message.role == "assistant" and message.text else []
    for use in message.toolUses:
        texts.extend(string_values(use.input))
    return texts


@dataclass
class ReuseIndex:
    """For one conversation: where every snippet appears in the reuse channels, and since when.

    A snippet is kept as its 64-bit hash (Python's ``hash`` of the string, stable within the
    process that builds and reads the index), not as text: the index holds a few integers per
    snippet instead of the snippet, its list of positions and two string-keyed entries. Two
    different snippets with the same hash would merge; with 64 bits and the few million snippets
    of the largest session that is astronomically unlikely (about 1e-6 of a chance that any two
    snippets of such a session collide at all, and such a pair must also be an output's snippet
    and a later repeat to change a feature).

    ``first`` also counts user text, so a snippet the user typed is never credited to an output
    that repeats it; a snippet only the user typed is not kept (only a snippet in a reuse channel
    can be reused).
    """

    size: int = 0  # messages indexed
    # snippet hash -> the first message showing it (reuse channel or user text)
    first: dict[int, int] = field(default_factory=dict)
    # snippet hash -> the last message repeating it in a reuse channel
    last: dict[int, int] = field(default_factory=dict)
    # the first words of the indexed shingles: an output's windows are built only where one starts
    heads: set[str] = field(default_factory=set)
    # every word of the reuse channels, when known: an output's window holding another word
    # cannot come back, so windows are built only within runs of these words
    vocabulary: set[str] | None = None

    def add_channel(self, position: int, found: set[str]) -> None:
        """``found``: the snippets of message ``position``'s reuse channels."""
        first, last, heads = self.first, self.last, self.heads
        for snippet in found:
            key = hash(snippet)
            first.setdefault(key, position)
            if last.get(key, -1) < position:
                last[key] = position
            space = snippet.find(" ")
            if space > 0:
                heads.add(snippet[:space])

    def add_user(self, position: int, found: set[str]) -> None:
        """``found``: the snippets of a user text at ``position``, after every channel is in."""
        first = self.first
        for snippet in found:
            key = hash(snippet)
            seen = first.get(key)
            if seen is not None and position < seen:
                first[key] = position

    def reuses(
        self, output: str, result_index: int, ids: set[str] | None = None, plain: bool | None = None
    ) -> dict[str, int]:
        """The output's distinctive snippets that come back, each with the last later message
        repeating it; ``ids``: the output's :func:`long_ids`, ``plain`` its :func:`ascii_words`,
        when the caller has them."""
        found: dict[str, int] = {}
        first, last, size = self.first, self.last, self.size
        candidates = _windows_of_known(normalized_words(output, plain), self.vocabulary, self.heads)
        for snippet in candidates | (long_ids(output, plain) if ids is None else ids):
            key = hash(snippet)
            if first.get(key, size) <= result_index:
                continue
            latest = last.get(key)
            if latest is not None:
                found[snippet] = latest
        return found


# SHINGLE_WORDS or more known words in a row, in a mask of one byte per word (1: known)
_KNOWN_RUN = re.compile(b"\x01{%d,}" % SHINGLE_WORDS)


def _windows_of_known(words: list[str], known: Container[str] | None, heads: Container[str] | None = None) -> set[str]:
    """:func:`_windows` of ``words`` made only of words in ``known`` (every window when None):
    only those can equal a window of a text whose words are all in ``known``."""
    if known is None or len(words) < SHINGLE_WORDS:
        return _windows(words, heads)
    found: set[str] = set()
    for run in _KNOWN_RUN.finditer(bytes(map(known.__contains__, words))):
        found |= _windows(words[run.start() : run.end()], heads)
    return found


def word_set(texts: Iterable[str], plain: Iterable[bool] | None = None) -> set[str]:
    """Every word of :func:`normalized_words` of ``texts``, and a few more (Read line numbers
    are kept: removing them only takes words away), without the patterns' cost; ``plain``:
    :func:`ascii_words` of each text, in order, when known."""
    found: set[str] = set()
    for text, known in zip(texts, plain) if plain is not None else ((text, None) for text in texts):
        words = _ascii_runs(text, _ONLY_WORDS, lower=True, plain=known)
        found.update(_WORD.findall(text.lower()) if words is None else words)
    return found


def build_reuse_index(messages: Sequence[SessionMessage], outputs: set[str] | None = None) -> ReuseIndex:
    """The index of ``messages``. With ``outputs`` (:func:`word_set` of the outputs it will be
    asked about), a shingle is indexed only when all its words are in it, since no other can
    equal one of theirs: the index answers :meth:`ReuseIndex.reuses` for those outputs as the
    whole index would."""
    vocabulary: set[str] = set()
    index = ReuseIndex(size=len(messages), vocabulary=vocabulary)
    for position, message in enumerate(messages):
        found: set[str] = set()
        for text in channel_texts(message):
            plain = ascii_words(text)  # one look for both token kinds
            words = normalized_words(text, plain)
            vocabulary.update(words)
            found |= _windows_of_known(words, outputs)
            found |= long_ids(text, plain)
        index.add_channel(position, found)
    # A user text only moves back where an indexed snippet was first seen: only its windows made
    # of channel words (and of the outputs' words) can matter.
    known = vocabulary if outputs is None else vocabulary & outputs
    for position, message in enumerate(messages):
        if message.role == "user" and message.text:
            plain = ascii_words(message.text)
            index.add_user(
                position, _windows_of_known(normalized_words(message.text, plain), known) | long_ids(message.text, plain)
            )
    return index
