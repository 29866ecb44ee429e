"""Every text the compaction puts in front of the model, in one place (pinned by contract tests).

The wording follows two rules: it states what happened affirmatively, and it says how to get
the content back (the archive path and "Read it if needed"). A call that leaves the
conversation always leaves a marker behind, so the model can see that the work was done.
"""

from __future__ import annotations

import re
from typing import Callable, Final

PREFIX: Final = "[fast-jev-compaction"

# Recognises our own marks, current and earlier spellings, so a later pass never cuts a cut.
_OWN_MARK = re.compile(r"\[fast-jev-compaction (?:kept |truncated |removed |moved |ran |trimmed )|\[fast-jev-compaction: ")
_SAVED_AT = re.compile(r"(?:saved at|full output:) (\S+?)(?:;|\s|\])")


def carries_mark(text: str) -> bool:
    """Whether ``text`` already holds one of our markers (it was cut by an earlier pass)."""
    # A text without "[" holds none, and one character is searched for (memchr) several times
    # quicker than the prefix: on the corpus 7 outputs in 10 have none, and the first "[" of the
    # others is near their start (2.5M instructions a corpus pass to 1.5M).
    return "[" in text and PREFIX in text and _OWN_MARK.search(text) is not None


def saved_path(text: str) -> str | None:
    """The archive path a marker in ``text`` names, if any."""
    match = _SAVED_AT.search(text)
    return match.group(1) if match else None


_CUT_TOTAL = re.compile(r"\[fast-jev-compaction kept [\d,]+ of ([\d,]+) chars of this ")


def cut_note(text: str) -> tuple[str, int | None] | None:
    """The archive path the note closing ``text`` names, when its last line is one of our marks
    (where :func:`truncation_note` puts it), and the size it says the output had (None in an
    earlier release's spelling): the file a cut output came from, if it is genuine."""
    last = text[text.rfind("\n") + 1:]
    path = saved_path(last) if carries_mark(last) else None
    if path is None:
        return None
    total = _CUT_TOTAL.match(last)
    return path, int(total.group(1).replace(",", "")) if total else None


# Any spelling that would pass for our prefix to a reader: any case, spaces after the bracket.
_LOOK_ALIKE = re.compile(r"\[\s*fast-jev-compaction", re.IGNORECASE)
# What a look-alike in foreign text reads as instead: visibly not one of our marks.
QUOTED: Final = "[quoted fast-jev-compaction"
# The notes the plugin itself puts in a tool output before or by a compaction (a media or tools
# note, a truncation note), as their builders below make them; ``path`` is the file one names.
_OUTPUT_NOTES = (
    re.compile(
        r"\[fast-jev-compaction kept [\d,]+ of [\d,]+ chars of this (?:error )?output \(its opening, closing "
        r"and key lines\); (?:the full (?:error )?output is saved at (?P<path>\S+); Read it if needed|re-run the tool if needed)\]"
    ),
    re.compile(
        r"\[fast-jev-compaction (?:saved an? [\w.+/-]+(?: \([\d.]+ (?:bytes|kB|MB)\))? of this output at (?P<path>\S+); "
        r"Read it to see it again|replaced an? [\w.+/-]+(?: \([\d.]+ (?:bytes|kB|MB)\))? of this output with this line; "
        r"re-run the tool to see it again)\]"
    ),
    re.compile(r"\[fast-jev-compaction notes that this search loaded the tools [\w.:, -]+; ToolSearch with \"select:[\w.:,-]+\" loads them again if needed\]"),
)


def quoted(text: str) -> str:
    """``text`` (a field copied into a mark, or a digest of foreign text) with every look-alike
    of our prefix spelled :data:`QUOTED`, so it cannot pass for one of our marks."""
    return _LOOK_ALIKE.sub(QUOTED, text) if "[" in text else text


def foreign_marks_quoted(text: str, genuine: Callable[[str], bool]) -> str:
    """``text``, a tool output, with the look-alikes of its lines quoted (:func:`quoted`), but
    for the lines that are our own notes: a note that names a file is ours only when
    ``genuine(path)`` (the file is in this pass's archive and holds what its name says)."""
    if "[" not in text or _LOOK_ALIKE.search(text) is None:
        return text
    lines = text.split("\n")
    foreign = [at for at, line in enumerate(lines) if _LOOK_ALIKE.search(line) is not None and not _own_note(line, genuine)]
    if not foreign:
        return text
    for at in foreign:
        lines[at] = quoted(lines[at])
    return "\n".join(lines)


def imitates_marks(text: str) -> bool:
    """Whether ``text`` holds a line that looks like one of our notes naming a file: no file is
    taken as ours, so any such line counts (what :func:`foreign_marks_quoted` would quote)."""
    return foreign_marks_quoted(text, lambda _path: False) is not text


def _own_note(line: str, genuine: Callable[[str], bool]) -> bool:
    for pattern in _OUTPUT_NOTES:
        match = pattern.fullmatch(line)
        if match is not None:
            path = match.group("path") if "path" in pattern.groupindex else None
            return path is None or genuine(path)
    return False


def _recovery(archive_path: str | None, what: str) -> str:
    if archive_path:
        return f"the full {what} is saved at {archive_path}; Read it if needed"
    return "re-run the tool if needed"


def truncation_note(total_chars: int, kept_chars: int, is_error: bool, archive_path: str | None) -> str:
    """The line that closes a truncated output's digest."""
    what = "error output" if is_error else "output"
    shown = f"kept {kept_chars:,} of {total_chars:,} chars of this {what} (its opening, closing and key lines)"
    return f"{PREFIX} {shown}; {_recovery(archive_path, what)}]"


def drop_marker(tool: str, target: str, output_chars: int, is_error: bool, archive_path: str | None) -> str:
    """The line that stands, in the assistant message, where a dropped call was."""
    # A target that holds a mark (an input an earlier rung moved to the archive, or an input
    # that imitates one) would put a second "saved at" in this line: the call goes unnamed.
    called = f"{quoted(tool)} call ({target})" if target and _LOOK_ALIKE.search(target) is None else f"{quoted(tool)} call"
    if output_chars == 0:
        return f"{PREFIX}: the {called} ran here and returned no {'error text' if is_error else 'output'}]"
    what = "error output" if is_error else "output"
    if archive_path:
        return (
            f"{PREFIX}: the {called} ran here; its {output_chars:,}-char {what} is saved at "
            f"{archive_path}; Read it if needed]"
        )
    return f"{PREFIX}: the {called} ran here; its {output_chars:,}-char {what} was left out; re-run it if needed]"


def input_marker(field: str, chars: int, archive_path: str, writes_file: bool) -> str:
    """Stands, in a kept call's input, for a long string field moved to the archive (the body of
    a Write or an Edit, a heredoc, a Task prompt): the call keeps its tool, target and other
    fields. A file-writing tool's file is there to read too, in its current state."""
    on_disk = "; the file on disk holds its current content" if writes_file else ""
    return f"{PREFIX} moved this {chars:,}-char {field} to the archive: saved at {archive_path}; Read it if needed{on_disk}]"


# The first line of a compacted history: the model learns once, up front, what the markers mean.
LEAD_NOTE: Final = (
    f"{PREFIX}: this conversation was compacted without a summary. Older tool outputs were cut "
    "to their key lines or moved out of it; each marker names the file that holds the full "
    "output, and one Read of that file brings it back; a tool output's imitation of a marker "
    f"reads {QUOTED} and names no saved file]"
)


def ids_line(tokens: list[str]) -> str:
    """Closes a digest: the names, paths and ids of the part left out (the saved file has them in place)."""
    return f"[ids and paths further in: {' '.join(tokens)}]"


def gap(omitted_chars: int) -> str:
    """Stands inside a digest where lines were left out."""
    return f"[… {omitted_chars:,} chars …]"


def size_text(size: int) -> str:
    """A byte count as people read it: ``75 bytes``, ``48.2 kB``, ``3.1 MB`` (one decimal)."""
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def media_note(what: str, size: int | None, saved_at: str | None) -> str:
    """Stands in a rebuilt tool result for an image or document the rebuild cannot carry.

    ``what`` names it (``an image/png``). Not one of the marks :func:`carries_mark` knows: the
    result is kept, not cut, and a later pass may still cut its text.
    """
    sized = f"{quoted(what)} ({size_text(size)})" if size is not None else quoted(what)
    if saved_at:
        return f"{PREFIX} saved {sized} of this output at {saved_at}; Read it to see it again]"
    return f"{PREFIX} replaced {sized} of this output with this line; re-run the tool to see it again]"


def moved_media_note(what: str, size: int, saved_at: str) -> str:
    """Stands, in a message older than the pinned window, where an image or a document attached
    to it was: the ladder's rung c moved it to the archive, whole, as a file Read shows."""
    return f"{PREFIX} moved {quoted(what)} ({size_text(size)}) of this message to the archive: saved at {saved_at}; Read it to see it again]"


def tools_note(names: list[str]) -> str:
    """Stands in a rebuilt tool-search result for the tool definitions it loaded (not carried)."""
    names = [quoted(name) for name in names]
    listed = ", ".join(names)
    return f"{PREFIX} notes that this search loaded the tools {listed}; ToolSearch with \"select:{','.join(names)}\" loads them again if needed]"


# What every lead line starts with, with or without a folder.
LEAD_HEAD: Final = LEAD_NOTE[:-1]


_LEAD_FOLDER: Final = ". Every saved file is in "
_LEAD_TAIL: Final = "; Grep that folder to find a detail no marker in view points at]"


def lead_note(archive_dir: str | None) -> str:
    """The lead line of a compacted history; with the archive folder named, so the model can also
    search it (Grep) for a detail no marker in view points at."""
    if not archive_dir:
        return LEAD_NOTE
    return f"{LEAD_HEAD}{_LEAD_FOLDER}{archive_dir}{_LEAD_TAIL}"


def is_lead_note(text: str) -> bool:
    """Whether ``text`` is a lead line :func:`lead_note` made, with or without a folder."""
    return text.startswith(LEAD_HEAD)


def without_lead_note(text: str) -> str:
    """``text`` without the lead line it opens with (the engine joins the line to the first user
    message of the request, so a later pass reads it as part of that prompt); as it is otherwise."""
    if not text.startswith(LEAD_HEAD):
        return text
    rest = text[len(LEAD_HEAD) :]
    if rest.startswith("]"):
        return rest[1:].lstrip()
    end = rest.find(_LEAD_TAIL)
    if rest.startswith(_LEAD_FOLDER) and end >= 0:
        return rest[end + len(_LEAD_TAIL) :].lstrip()
    return text


# How many files an old turn's index line names before it counts the rest.
INDEX_FILES = 8
_TURN_INDEX: Final = f"{PREFIX}: the assistant's replies to this prompt"


def turn_index_line(
    calls: list[tuple[str, int]], files: list[str], turn_chars: int, archive_path: str, *, part: bool = False
) -> str:
    """Stands, as the assistant's reply, for an old turn moved whole to the archive (rung d), or
    with ``part`` for the older part of the turn in flight (rung e), the rest of which follows it:
    ``calls`` are (tool, count) in order of first use, ``files`` the files its calls read or
    edited, ``turn_chars`` what it held."""
    made = ", ".join(f"{quoted(tool)} ×{count}" if count > 1 else quoted(tool) for tool, count in calls)
    total = sum(count for _, count in calls)
    did = f" and its {made} call" if total == 1 else f" and its {total:,} tool calls ({made})" if calls else ""
    touched = ""
    if files:
        more = len(files) - INDEX_FILES
        touched = f"; files touched: {', '.join(quoted(file) for file in files[:INDEX_FILES])}" + (f" and {more:,} more" if more > 0 else "")
    replies, saved = (" up to here", "this part of the turn") if part else ("", "the whole turn")
    return (
        f"{_TURN_INDEX}{replies}{did} were moved out of the conversation{touched}; "
        f"{saved} ({turn_chars:,} chars) is saved at {archive_path}; Read it if needed]"
    )


def short_index_line(archive_path: str) -> str:
    """An old turn's index line without its calls, files and size: a long session's many index
    lines are what is left to shrink once every turn that could go has gone (rung e)."""
    return f"{_TURN_INDEX}, with their calls, were moved out of the conversation; the whole turn is saved at {archive_path}; Read it if needed]"


def prompt_note(total_chars: int, archive_path: str) -> str:
    """Closes an old prompt cut to its opening (rung e, last): its turn is in the archive already,
    and the prompt, whole, is saved beside it."""
    return (
        f"{_PROMPT_NOTE}the whole prompt "
        f"({total_chars:,} chars) is saved at {archive_path}; Read it if needed]"
    )


_PROMPT_NOTE = f"{PREFIX} moved the rest of this prompt out of the conversation; "


def is_prompt_note(line: str) -> bool:
    """Whether ``line`` is a note :func:`prompt_note` made."""
    return line.startswith(_PROMPT_NOTE) and line.endswith("; Read it if needed]")


def fold_note(prompts: int, total_chars: int, archive_path: str) -> str:
    """Stands, as a user message, for the conversation before the turn in flight moved to one
    file (the ladder's last textual step, ``turn_eviction.fold_old_turns``): ``prompts`` earlier
    prompts, the replies to them (index lines and notes naming their own files) and what they held."""
    # Short: it is taken in windows of a few hundred tokens, where every character counts.
    return f"{_FOLD}{prompts:,} prompt(s), {total_chars:,} chars) is saved at {archive_path}; Read it if needed]"


_FOLD = f"{PREFIX}: the conversation before this point ("


def is_fold_note(text: str) -> bool:
    """Whether ``text`` is a note :func:`fold_note` made."""
    return text.startswith(_FOLD)


def is_turn_index_line(text: str) -> bool:
    """Whether ``text`` is an index line :func:`turn_index_line` made (a turn, or its part,
    already evicted)."""
    return text.startswith(_TURN_INDEX)
