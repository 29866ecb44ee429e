"""Apply decisions to the messages.

Invariants: untouched messages are returned as the same objects; the input is never mutated;
the user's and the assistant's own text is never changed (a dropped call adds a marker line
after it, nothing else); a result never outlives its call; a message left with nothing is
removed; every cut leaves a marker saying where the full output is; a call whose long input
fields moved to the archive keeps every key of its input, each moved field a marker naming its
file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain
from typing import Any, Mapping, Sequence

from ..conversation.lexicon import call_target
from ..conversation.messages import BLOCK_FIELDS, NO_EXTRA, RECORD_FIELDS, SessionMessage, ToolResult, ToolUse
from ..conversation.pairing import ToolCall
from ..conversation.sizes import message_chars
from .archive import EXTENSIONS, archive_path, base64_bytes
from .decisions import DROP, TRUNCATE, Action, CallDecision
from .digest import DigestShape, digest
from .markers import drop_marker, input_marker, moved_media_note, quoted, truncation_note

# A cut must free at least this many characters, marker included, or the output stays whole.
MIN_SAVING = 400
_RECORD_IDS = frozenset({"uuid", "handle"})


def cut_output(
    text: str, is_error: bool, shape: DigestShape, archive_path: str | None, pointed: frozenset[int] = frozenset()
) -> str | None:
    """The digest of a long output plus its note, or None when cutting would not pay.

    ``pointed``: of a file read, the lines that earlier outputs pointed at (pointers.py)."""
    if len(text) <= shape.budget + MIN_SAVING:
        return None
    body, kept = digest(text, shape, pointed)
    # The digest of an output that imitates our marks: the look-alikes it keeps read as quoted
    # (a genuine earlier cut is never cut again, rules.py's already-cut).
    body = quoted(body)
    note = truncation_note(len(text), kept, is_error, archive_path)
    cut = f"{body}\n{note}" if body else note
    return cut if len(text) - len(cut) >= MIN_SAVING else None


# The input fields that hold a call's long bodies, by tool: what the ladder's rung b moves to the
# archive (MultiEdit's ``edits`` hold each edit's ``old_string`` and ``new_string``).
INPUT_BODIES: Mapping[str, tuple[str, ...]] = {
    "Write": ("content",),
    "Edit": ("old_string", "new_string"),
    "MultiEdit": ("edits",),
    "NotebookEdit": ("new_source",),
    "Bash": ("command",),
    "Task": ("prompt",),
    "Agent": ("prompt",),
}
_EDIT_STRINGS = ("old_string", "new_string")
# Tools whose body went into a file: the file on disk holds the current content.
WRITES_FILES = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# The blocks a message may carry beside its text that rung c moves to the archive.
_MEDIA_KINDS = frozenset({"image", "document"})


@dataclass(frozen=True)
class TrimmedInput:
    """A call's input with its long bodies replaced by markers, and the files that hold them
    (path -> body, each saved whole)."""

    input: dict[str, Any]
    files: dict[str, str]


def trimmed_input(tool: str, tool_input: Mapping[str, Any], archive_dir: str) -> TrimmedInput | None:
    """``tool_input`` with each body field (``INPUT_BODIES``) that frees ``MIN_SAVING`` replaced
    by its marker, the same keys in the same order; None when no field pays (or the tool has
    none). A field an earlier pass moved already (a marker) stays as it is: it is shorter than
    the marker that would replace it and the saving it would need."""
    fields = INPUT_BODIES.get(tool)
    if not fields:
        return None
    writes = tool in WRITES_FILES
    files: dict[str, str] = {}

    def moved(field: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        path = archive_path(archive_dir, value)
        marker = input_marker(field, len(value), path, writes)
        if len(value) - len(marker) < MIN_SAVING:
            return value
        files[path] = value
        return marker

    trimmed = dict(tool_input)
    for field in fields:
        value = trimmed.get(field)
        if field == "edits" and isinstance(value, list):
            trimmed[field] = [
                {key: moved(key, item) if key in _EDIT_STRINGS else item for key, item in edit.items()}
                if isinstance(edit, dict) else edit
                for edit in value
            ]
        elif field in trimmed:
            trimmed[field] = moved(field, value)
    return TrimmedInput(trimmed, files) if files else None


@dataclass(frozen=True)
class MovedMedia:
    """A message whose attached images and documents moved to the archive: the message with a
    note in each one's place, the files (path -> bytes) and how many moved."""

    message: SessionMessage
    files: dict[str, bytes]
    count: int


def media_blocks(message: SessionMessage) -> int:
    """How many image and document blocks ride on ``message`` (its ``extraBlocks``)."""
    blocks = message.extra.get("extraBlocks")
    if not isinstance(blocks, list):
        return 0
    return sum(1 for block in blocks if isinstance(block, dict) and block.get("type") in _MEDIA_KINDS)


def moved_media(message: SessionMessage, archive_dir: str) -> MovedMedia | None:
    """``message`` with each attached image or document that can be saved (base64 data of a
    type Read shows, ``archive.EXTENSIONS``) replaced by a text block holding its note; None
    when none can. Its text and tool blocks stay as they are."""
    blocks = message.extra.get("extraBlocks")
    if not isinstance(blocks, list):
        return None
    files: dict[str, bytes] = {}
    kept: list[Any] = []
    for block in blocks:
        source = block.get("source") if isinstance(block, dict) and block.get("type") in _MEDIA_KINDS else None
        media_type = source.get("media_type") if isinstance(source, dict) else None
        extension = EXTENSIONS.get(media_type) if isinstance(media_type, str) else None
        data = base64_bytes(source.get("data")) if extension is not None and isinstance(source, dict) else None
        if data is None or extension is None:
            kept.append(block)
            continue
        path = archive_path(archive_dir, data, extension)
        files[path] = data
        kept.append({"type": "text", "text": moved_media_note(f"an {media_type}", len(data), path)})
    if not files:
        return None
    # A new record, like any rebuilt message: a handle would bring the original blocks back, and
    # its record's fields (imagePasteIds) would name what moved.
    extra = {key: value for key, value in message.extra.items() if key not in _RECORD_IDS and key != RECORD_FIELDS}
    return MovedMedia(replace(message, handle=None, extra={**extra, "extraBlocks": kept}), files, len(files))


@dataclass(frozen=True, slots=True)
class Cut:
    """What truncating or dropping one call does, made once for the budget policy's probes and
    the rebuild alike: the characters of context it frees (as ``message_chars`` counts them,
    marker included) and a truncation's cut output (None when cutting does not pay). A drop's
    marker line is measured, not kept (None): the rebuild makes it again, since one kept per
    probed call would stand beside the rebuilt history at the compaction's peak of memory."""

    freed: int
    text: str | None


def cut_of(
    result: ToolResult,
    call: ToolCall,
    action: Action,
    shape: DigestShape,
    archive_path: str | None,
    input_size: int,
    pointed: frozenset[int] = frozenset(),
) -> Cut:
    """The :class:`Cut` of ``action`` (truncate or drop) on ``call``, whose output is ``result``
    and is saved at ``archive_path``, and whose input is ``input_size`` long (``input_chars``,
    measured once per compaction: ``sizes.measured``)."""
    if action == DROP:
        marker = drop_marker(call.tool, call_target(call.tool, call.input), call.result_chars, call.is_error, archive_path)
        return Cut(call.result_chars + input_size - len(marker) - 1, None)
    cut = cut_output(result.text, call.is_error, shape, archive_path, pointed)
    return Cut(0 if cut is None else len(result.text) - len(cut), cut)


def apply_decisions(
    messages: Sequence[SessionMessage],
    decisions: Sequence[CallDecision],
    calls: Sequence[ToolCall],
    shape: DigestShape,
    made: Mapping[str, str | None] | None = None,
) -> list[SessionMessage]:
    """Rebuild the transcript; each cut decision's ``archive_path`` goes into its marker.

    ``made``: by tool_use_id, the cut output each truncation leaves (``Cut.text``), made already
    with this ``shape`` and the decision's archive path, so none is made twice.
    """
    return rebuild(messages, decisions, calls, shape, made)[0]


def rebuild(
    messages: Sequence[SessionMessage],
    decisions: Sequence[CallDecision],
    calls: Sequence[ToolCall],
    shape: DigestShape,
    made: Mapping[str, str | None] | None = None,
    sizes: Sequence[int] | None = None,
    inputs: Mapping[str, dict[str, Any]] | None = None,
    shown: Mapping[str, str] | None = None,
) -> tuple[list[SessionMessage], int]:
    """:func:`apply_decisions`, and, given ``sizes`` (``message_chars`` of each message by
    position), the characters the rebuild took out (0 without): only the messages it changed or
    left out are measured.

    ``inputs``: by tool_use_id, the input a kept or truncated call goes back with
    (:func:`trimmed_input`); a dropped call leaves with its input whatever it holds.
    ``shown``: by tool_use_id, the text a kept output goes back with in place of its own (its
    imitations of our marks quoted: ``compaction.outputs_shown``).
    """
    shown = shown or {}
    pinned = {call.tool_use_id for call in calls if call.pinned}
    # A forged or stale decision cannot touch a pinned call.
    cuts = {
        d.tool_use_id: d for d in decisions if d.action in (TRUNCATE, DROP) and d.tool_use_id not in pinned
    }
    new_inputs = {tool_use_id: made_input for tool_use_id, made_input in (inputs or {}).items() if tool_use_id not in pinned}
    # The cut calls only: this runs at a compaction's peak of memory.
    by_id = {
        call.tool_use_id: call
        for call in calls
        if call.tool_use_id in cuts or call.tool_use_id in new_inputs or call.tool_use_id in shown
    }
    # Where the cut calls sit, when every one is a call of these messages: the other messages are
    # passed over without a look at their blocks.
    # One flag a message, not a set of positions (an int object and a table slot each).
    touched: bytearray | None = None
    if all(tool_use_id in by_id for tool_use_id in chain(cuts, new_inputs, shown)):
        touched = bytearray(len(messages))
        for tool_use_id in chain(cuts, new_inputs, shown):
            touched[by_id[tool_use_id].call_index] = touched[by_id[tool_use_id].result_index] = 1
    out: list[SessionMessage] = []
    taken = 0
    known = made or {}
    for position, message in enumerate(messages):
        if touched is not None and not touched[position]:
            out.append(message)
            continue
        results = message.toolResults or ()
        if not any(
            u.tool_use_id in cuts or u.tool_use_id in new_inputs or u.tool_use_id in shown for u in message.toolUses
        ) and not any(
            r.tool_use_id in cuts or r.tool_use_id in shown or (r.tool_use_id in new_inputs and RECORD_FIELDS in r.extra)
            for r in results
        ):
            out.append(message)
            continue

        uses: list[ToolUse] = []
        marks: list[str] = []
        changed = False
        for use in message.toolUses:
            decision = cuts.get(use.tool_use_id)
            made_input = new_inputs.get(use.tool_use_id)
            if made_input is not None and (decision is None or decision.action != DROP):
                use = ToolUse(use.tool_use_id, use.tool, made_input, use.text, use.isError, use.extra)
                changed = True
            if decision is None and use.text is not None and use.tool_use_id in shown:
                # The copy of the output a call carries goes back as its result does (without the
                # record that holds it as it was, as a cut call's does).
                use = ToolUse(use.tool_use_id, use.tool, use.input, shown[use.tool_use_id], use.isError, block_only(use.extra))
                changed = True
            if decision is None:
                uses.append(use)
            elif decision.action == DROP:
                call = by_id[use.tool_use_id]
                marks.append(
                    drop_marker(
                        call.tool, call_target(call.tool, call.input), call.result_chars, call.is_error,
                        decision.archive_path,
                    )
                )
                changed = True
            else:
                new = _truncated_use(use, shape, decision.archive_path)
                changed = changed or new is not use
                uses.append(new)

        kept_results: list[ToolResult] = []
        for result in results:
            decision = cuts.get(result.tool_use_id)
            if decision is None and result.tool_use_id in shown:
                kept_results.append(ToolResult(tool_use_id=result.tool_use_id, text=shown[result.tool_use_id], isError=bool(result.isError)))
                changed = True
            elif decision is None and result.tool_use_id in new_inputs and RECORD_FIELDS in result.extra:
                # The record of a call (a transcript's toolUseResult) repeats its input: an input
                # moved to the archive takes it along.
                kept_results.append(replace(result, extra={k: v for k, v in result.extra.items() if k != RECORD_FIELDS}))
                changed = True
            elif decision is None:
                kept_results.append(result)
            elif decision.action == DROP:
                changed = True
            else:
                new_result = _truncated_result(result, shape, decision.archive_path, known)
                changed = changed or new_result is not result
                kept_results.append(new_result)

        if not changed:
            out.append(message)
            continue
        if sizes is not None:
            taken += sizes[position]
        text = "\n".join([message.text, *marks]) if message.text else "\n".join(marks)
        if not text.strip() and not uses and not kept_results:
            continue
        rebuilt = _rebuilt(message, text, uses, kept_results)
        if sizes is not None:
            taken -= message_chars(rebuilt)
        out.append(rebuilt)
    return out, taken


def _truncated_use(use: ToolUse, shape: DigestShape, archive_path: str | None) -> ToolUse:
    cut = cut_output(use.text or "", bool(use.isError), shape, archive_path)
    if cut is None:
        return use
    return ToolUse(
        tool_use_id=use.tool_use_id,
        tool=use.tool,
        input=use.input,
        text=cut,
        isError=True if use.isError else None,
        extra=block_only(use.extra),
    )


def block_only(extra: Mapping[str, Any]) -> Mapping[str, Any]:
    """A call's block members alone (a transcript's ``caller``): what its output's cut leaves
    as it was; the record holding the output does not go with it."""
    own = extra.get(BLOCK_FIELDS)
    return NO_EXTRA if own is None else {BLOCK_FIELDS: own}


def _truncated_result(
    result: ToolResult, shape: DigestShape, archive_path: str | None, made: Mapping[str, str | None]
) -> ToolResult:
    if result.tool_use_id in made:
        cut = made[result.tool_use_id]
    else:
        cut = cut_output(result.text, bool(result.isError), shape, archive_path)
    if cut is None:
        return result
    return ToolResult(tool_use_id=result.tool_use_id, text=cut, isError=bool(result.isError))


def _rebuilt(message: SessionMessage, text: str, uses: list[ToolUse], results: list[ToolResult]) -> SessionMessage:
    """A handle-less copy: the engine rebuilds it from role, text and tool blocks.

    Other blocks the reader kept (thinking, images) ride along as extras rather than vanish;
    the record id does not, since this is a new record.
    """
    extras = {k: v for k, v in message.extra.items() if k not in _RECORD_IDS}
    return SessionMessage(
        role=message.role,
        text=text,
        toolUses=tuple(uses),
        toolResults=tuple(results) or None,
        extra=extras or NO_EXTRA,
    )
