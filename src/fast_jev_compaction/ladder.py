"""The eviction ladder, one entry point for the hook and the CLI: :func:`compact_to_fit`.

Each rung is taken only when the ones before it leave the context above what the window needs
(``policy.chars_to_free``): a) to c) the pass (``compaction.compact``: tool results, and what
it cuts besides); when the exchange in flight's outputs are more than the aim leaves beside the
last prompt, they cannot stay whole whatever else leaves, so the pass runs again with nothing
pinned and cuts them (with the other outputs over their cut-over, least valuable first) before
any turn leaves for room it would not get (``_trailing_over``); d) the oldest turns, and of
the one the need ends in only its older part (``turn_eviction.py``); e) the pinned recent window
shrinks to the turn in flight (the pass runs again over d's history with that pin, then d again,
the first message's turn included). While old turns can go (``turn_eviction.has_old_turn``),
rung a's further cuts, of outputs under their cut-over, wait for that second pass: the oldest
turns are worth less than the outputs the budget would not cut by their size, the recent ones
above all; the second pass takes the first one's judge answers for the calls it scored; then what is left of the old turns, least valuable first:
their index lines shrink to the file each names, and old prompts to their opening and the file
that holds each whole (the user's last prompt stays whole); only then the turn in flight's
older part, the most recent work, goes, its last exchange staying
(``turn_eviction.evict_in_flight``); then the conversation before the turn in flight, what is
left of it, goes to one file and one note (``turn_eviction.fold_old_turns``), where that frees
more than the note costs and the context needs it to come under its target; and when the exchange in
flight alone is over what the window spares, its outputs are cut too, as any other (the fold
follows that cut when it falls short: a rule keeps an error not yet fixed whole);
f) nothing more: the result says how far it got, and the hook's gate sends a pass still over
the window to the built-in summary. Without a window the pass alone runs, as it always did.

Before any rung, a last prompt that is a ``!`` command's output (Claude Code records it as a user
message of its own: the command's words, not the user's) is cut as a tool's output is, digest and
note, when no rung could make it fit whole (``_command_output_first``); the user's own last
prompt is never cut.

A rung frees whole outputs and whole turns (but the last, of which only the part needed), so the step that meets the need often frees more:
that surplus goes back to the outputs cut last, most recent first (``give_back.py``), and the
context ends near its aim rather than far under it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, cast

from .compaction import CompactResult, compact, shape_of
from .conversation.sizes import input_chars, message_chars
from .decide.archive import archived
from .decide.decisions import (
    BUDGET,
    DROP,
    INPUT_ARCHIVED,
    KEEP,
    OLD_TURN,
    PINNED,
    SMALL,
    THRESHOLD,
    TRUNCATE,
    UNDER_CUT,
    UNDER_TARGET,
    CallDecision,
)
from .decide.digest import DigestShape
from .decide.policy import CHARS_PER_TOKEN, MEDIA_CHARS, TARGET_MARGIN_POINTS, chars_to_free
from .decide.rebuild import media_blocks
from .decide.turn_eviction import (
    Eviction,
    cut_command_output,
    evict_in_flight,
    evict_turns,
    fold_old_turns,
    has_old_turn,
    in_flight_preserve,
    is_command_output,
    last_prompt_chars,
    least_chars,
    prompt_positions,
    shorten_index_lines,
    shorten_old_prompts,
)
from .give_back import given_back
from .options import CompactOptions
from .state.asker import in_process
from .state.goal import goal_from_messages
from .stats import CompactStats

if TYPE_CHECKING:
    from .conversation.messages import SessionMessage
    from .conversation.pairing import Pairing, ToolCall
    from .state.answer_cache import AnswerCache
    from .state.asker import JevAsker

# Reasons that are not a rule's name (compaction.py counts a decision settled by rules by name).
_NOT_RULES = frozenset({PINNED, SMALL, THRESHOLD, UNDER_CUT, BUDGET, OLD_TURN, UNDER_TARGET, INPUT_ARCHIVED})


async def compact_to_fit(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
    cache: AnswerCache | None = None,
    pending: Mapping[str, str] | None = None,
) -> CompactResult:
    """Compact ``messages``, down the ladder as far as the window needs; without a window
    (``options.window_tokens`` 0) exactly what :func:`compaction.compact` returns. ``pending``:
    archive files saved elsewhere than on disk (path -> text), as :func:`compaction.compact` takes."""
    started = time.perf_counter()
    opts = options or CompactOptions()
    early = _command_output_first(messages, opts)
    if early is None:
        return await _down_the_ladder(messages, asker, opts, cache, pending, started)
    # A last prompt that is a command's output (a test run printed with ``!``), not the user's
    # words, over what the context's aim leaves it cannot stay whole whatever else leaves: it is
    # cut first, as a tool's output would be, and the ladder frees what is left of the need.
    cut_messages, freed, files = early
    tokens = max(1, opts.context_tokens - round(freed / CHARS_PER_TOKEN)) if opts.context_tokens else 0
    result = await _down_the_ladder(cut_messages, asker, replace(opts, context_tokens=tokens), cache, pending, started)
    result.archive.update(files)
    result.stats.chars_before += freed
    result.stats.command_output_cut = True
    if result.stats.need_chars is not None:
        result.stats.need_chars += freed
    return result


def _command_output_first(
    messages: Sequence[SessionMessage], opts: CompactOptions
) -> tuple[list[SessionMessage], int, dict[str, str]] | None:
    """The messages with their last prompt cut (``turn_eviction.cut_command_output``) when it is a
    command's output and the fewest characters the ladder could bring the context to with it
    whole (``turn_eviction.least_chars``: it, and the one note that would stand for what precedes
    it) are over the context's aim; else None."""
    prompts = prompt_positions(messages)
    if not opts.archive_dir or not prompts or not is_command_output(messages[prompts[-1]]):
        return None
    chars = sum(map(message_chars, messages)) + MEDIA_CHARS * sum(map(media_blocks, messages))
    need = chars_to_free(chars, opts)
    if need is None or need <= 0:
        return None
    # What the messages should come to: the need is of the whole context (the engine's count,
    # when given, holds more than they do), so it comes off them alone.
    if least_chars(messages, opts.archive_dir) <= chars - need:
        return None
    cut, freed, files = cut_command_output(messages, need, _shape(messages, opts), opts.archive_dir)
    return (cut, freed, files) if freed else None


async def _down_the_ladder(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    opts: CompactOptions,
    cache: AnswerCache | None,
    pending: Mapping[str, str] | None,
    started: float,
) -> CompactResult:
    # With old turns to move out, rung a's further cuts wait: the outputs under their cut-overs,
    # the recent ones most of all, are worth more than the oldest turns, which go first (d).
    deferred = bool(opts.archive_dir) and has_old_turn(messages, opts.preserve_recent_messages)
    first = await compact(messages, asker, opts, cache, pending, further=not deferred)
    # The need is of the context before the pass (the engine's count of it when given), so what
    # is left of it is that need less what the ladder freed so far.
    need = chars_to_free(first.stats.chars_before, opts)
    if need is None:
        return first
    if _left(need, first.stats, first.stats.chars_after) <= 0:
        return given_back(first, messages, -_left(need, first.stats, first.stats.chars_after), _shape(messages, opts))
    if not opts.archive_dir:
        # An old turn leaves only into the archive: without one the ladder stops at the pass.
        return first
    archive_dir = opts.archive_dir
    preserve = opts.preserve_recent_messages
    steps: list[CompactResult] = []
    evictions: list[Eviction] = []
    base, chars_after = first, first.stats.chars_after
    if _trailing_over(first.messages, first.stats.chars_before - need):
        # The trailing cut (see the module's description), with the further cuts still waiting
        # while old turns can go.
        early = await compact(
            first.messages, _remembering(asker, first), _again(opts, 0, first.stats, chars_after), cache,
            _pending(first, [], [], pending), further=not deferred,
        )
        # Nothing moved out beside the first pass: each step keeps its eviction (``_combined``).
        evictions.append(Eviction(first.messages, [], {}))
        steps.append(early)
        base, chars_after = early, early.stats.chars_after
    # The messages the last pass was run over (``evict_turns`` renders a turn's file from them).
    source = messages if base is first else first.messages
    left = _left(need, first.stats, chars_after)
    evicted = evict_turns(source, base.messages, base.calls, preserve, left, archive_dir) if left > 0 else Eviction(base.messages, [], {})
    chars_after -= evicted.freed
    evictions.append(evicted)
    history = evicted.messages
    # Rung e: the pin shrinks to the turn in flight's trailing calls (a prompt is never cut, the
    # user's last one included), and the first message is pinned no more.
    pin = min(preserve, in_flight_preserve(history, 0))
    calls = base.calls
    if _left(need, first.stats, chars_after) > 0 and (pin < preserve or deferred):
        # The pass again over d's history with that pin (and the further cuts that waited), then d again.
        again = await compact(
            history, _remembering(asker, base), _again(opts, pin, first.stats, chars_after), cache,
            _pending(first, steps, evictions, pending),
        )
        chars_after = again.stats.chars_after
        evicted = evict_turns(
            history, again.messages, again.calls, pin, _left(need, first.stats, chars_after), archive_dir, keep_first=False
        )
        chars_after -= evicted.freed
        calls = again.calls
        steps.append(again)
        evictions.append(evicted)
        history = evicted.messages
    elif _left(need, first.stats, chars_after) > 0:
        # The pin holds the turn in flight already: only the first message's turn is freed, so d
        # runs once more over the pass's output (oldest first, that turn included).
        evicted = evict_turns(source, base.messages, base.calls, preserve, left, archive_dir, keep_first=False)
        chars_after = base.stats.chars_after - evicted.freed
        evictions[-1] = evicted
        history = evicted.messages
    shrunk = 0
    if _left(need, first.stats, chars_after) > 0:
        # The index lines of old turns, least valuable of what is left, shrink to the file each names.
        history, shrunk = shorten_index_lines(history, _left(need, first.stats, chars_after))
        chars_after -= shrunk
    prompts: dict[str, str] = {}
    prompts_cut = 0  # a prompt pasted twice is one file and two prompts cut
    if _left(need, first.stats, chars_after) > 0:
        # Then old prompts, past their opening: the user's last one stays whole.
        whole = history
        history, cut, prompts = shorten_old_prompts(history, _left(need, first.stats, chars_after), archive_dir)
        prompts_cut = sum(new is not old for old, new in zip(whole, history))
        chars_after -= cut
        shrunk += cut
    if _left(need, first.stats, chars_after) > 0:
        # Then the older part of the turn in flight, its last exchange staying.
        part = _in_flight_too(
            Eviction(history, [], {}), calls, pin, _left(need, first.stats, chars_after), archive_dir
        )
        if part.turns:
            chars_after -= part.freed
            evicted = Eviction(part.messages, [*evicted.turns, *part.turns], {**evicted.archive, **part.archive})
            evictions[-1] = evicted
            history = part.messages
    # Then what is left of the conversation before the turn in flight (old prompts' openings,
    # index lines, turns that could not go alone), oldest first, into one file and one note: the
    # user's earlier words are the last of the history to go, and only where the context cannot
    # come under the target itself (not only its aim's margin) without them: the trailing
    # outputs' cut below, when it alone could, keeps each output's digest in view, where a fold
    # keeps nothing of the user's earlier words.
    margin = opts.window_tokens * TARGET_MARGIN_POINTS / 100 * CHARS_PER_TOKEN
    saved = {**(pending or {}), **prompts}
    fold = _fold(
        history, calls, pin, _left(need, first.stats, chars_after), margin, archive_dir,
        _reader(archive_dir, _pending(first, steps, evictions, saved)), _trailing_output_chars(history, pin),
    )
    if fold is not None:
        chars_after -= fold.freed
        evicted = Eviction(fold.messages, [*evicted.turns, *fold.turns], {**evicted.archive, **fold.archive})
        evictions[-1] = evicted
        history = fold.messages
    if 0 < _left(need, first.stats, chars_after) <= _trailing_output_chars(history, pin):
        # The last reach before the summary: the trailing exchange holds what the window cannot
        # (parallel reads of large files). Its outputs, pinned till now, are cut like any other,
        # least valuable first and only as far as the need; each is archived whole. While less
        # than what is still over, cutting them would not fit the window: they stay whole.
        last = await compact(
            history, asker, _again(opts, 0, first.stats, chars_after), cache, _pending(first, steps, evictions, pending)
        )
        chars_after = last.stats.chars_after
        steps.append(last)
        history = last.messages
        # That cut may fall short (a rule keeps an error not yet fixed whole; a digest still
        # holds its share): when the context is still over its target, the fold that waited for
        # the cut goes now.
        fold = _fold(
            history, calls, pin, _left(need, first.stats, chars_after), margin, archive_dir,
            _reader(archive_dir, _pending(first, steps, evictions, saved)), 0,
        )
        evictions.append(Eviction(history, [], {}) if fold is None else fold)
        if fold is not None:
            chars_after -= fold.freed
            history = fold.messages
    if not steps and not evicted.turns and not shrunk:
        return first
    combined = _combined(first, steps, evictions, history, chars_after, started, need)
    combined.archive.update(prompts)
    combined.stats.prompts_archived = prompts_cut
    return given_back(combined, messages, -_left(need, first.stats, chars_after), _shape(messages, opts))


def _shape(messages: Sequence[SessionMessage], opts: CompactOptions) -> DigestShape:
    """The digests' shape the pass cut with, the goal's focus included."""
    return shape_of(opts, opts.goal or goal_from_messages(messages))


class _Remembered:
    """An in-process judge whose answers in the ladder's first pass stand for the same calls in
    its next: the judge is the most of a pass's time, and those answers are this compaction's."""

    def __init__(self, judge: Any, answers: Mapping[str, tuple[float, float]]) -> None:
        self.judge = judge
        self.answers = answers

    def score_calls(
        self, messages: Sequence[SessionMessage], pairing: Pairing, goal: str, only: Sequence[ToolCall]
    ) -> dict[str, tuple[float, float]]:
        known = {call.tool_use_id: self.answers[call.tool_use_id] for call in only if call.tool_use_id in self.answers}
        rest = [call for call in only if call.tool_use_id not in self.answers]
        fresh: dict[str, tuple[float, float]] = self.judge.score_calls(messages, pairing, goal, only=rest) if rest else {}
        return {**known, **fresh}


def _remembering(asker: JevAsker, first: CompactResult) -> JevAsker:
    """``asker``, or for an in-process judge one that remembers its answers in ``first``."""
    if not in_process(asker):
        return asker
    answers = {d.tool_use_id: (d.keep_call, d.keep_result) for d in first.decisions if d.reason == BUDGET}
    return cast("JevAsker", _Remembered(asker, answers))


def _trailing_over(history: Sequence[SessionMessage], aim: float) -> bool:
    """Whether the outputs of the trailing exchange of ``history`` are more than ``aim``
    characters leave beside the user's last prompt and the exchange's own calls, while those
    alone fit in it: the outputs cannot stay whole whatever else leaves, and their cut brings the
    context under its aim. (When the prompt and the calls alone are over it, no cut reaches the
    target, and the outputs the model has not read yet stay whole, the engine's threshold
    permitting: the gate decides.)"""
    pin = in_flight_preserve(history, 0)
    if not pin:
        return False
    outputs = _trailing_output_chars(history, pin)
    rest = sum(message_chars(m) for m in history[len(history) - pin :]) - outputs
    return 0 <= aim - last_prompt_chars(history) - rest < outputs


def _trailing_output_chars(history: Sequence[SessionMessage], pin: int) -> int:
    """The characters of the outputs in the last ``pin`` messages (the exchange in flight)."""
    return sum(len(result.text) for message in history[len(history) - pin :] if pin for result in message.toolResults or ())


def _pending(
    first: CompactResult, steps: list[CompactResult], evictions: list[Eviction], given: Mapping[str, str] | None
) -> dict[str, str]:
    """The files the ladder has yet to write (the edge writes them all at its end), which a later
    pass recognises as our own archive beside those already on disk."""
    pending = {**(given or {}), **first.archive}
    for step in steps:
        pending.update(step.archive)
    for evicted in evictions:
        pending.update(evicted.archive)
    return pending


def _again(opts: CompactOptions, pin: int, stats: CompactStats, chars_after: int) -> CompactOptions:
    """The options of a pass again over the ladder's history, pinning ``pin`` recent messages.
    The pass measures its own need: of that history, whose count (when the engine gave one for
    the whole context) is that count less what the ladder freed so far."""
    freed = stats.chars_before - chars_after
    context = max(1, round(opts.context_tokens - freed / CHARS_PER_TOKEN)) if opts.context_tokens else 0
    return replace(opts, preserve_recent_messages=pin, context_tokens=context)


def _fold(
    history: list[SessionMessage], calls: Sequence[ToolCall], pin: int, left: float, margin: float,
    archive_dir: str, read: Callable[[str], str | None], cuttable: int,
) -> Eviction | None:
    """The fold of ``history``'s conversation before the turn in flight
    (``turn_eviction.fold_old_turns``), when ``left`` still to free, less the aim's ``margin``,
    is more than ``cuttable`` (the trailing outputs a later cut may take) and the fold brings it
    within that; else None: a fold that leaves the context over its target takes the user's
    earlier words out of view for nothing (in a window of a few hundred tokens, a note may cost
    more than it frees)."""
    over = left - margin
    if left <= 0 or over <= cuttable:
        return None
    fold = fold_old_turns(history, calls, pin, left, archive_dir, read)
    if not fold.turns or over - fold.freed > cuttable:
        return None
    return fold


def _in_flight_too(evicted: Eviction, calls: Sequence[ToolCall], pin: int, left: float, archive_dir: str) -> Eviction:
    """``evicted`` and, while ``left`` is still to free, the older part of its turn in flight."""
    if left <= 0:
        return evicted
    part = evict_in_flight(evicted.messages, calls, pin, left, archive_dir)
    if not part.turns:
        return evicted
    return Eviction(part.messages, [*evicted.turns, *part.turns], {**evicted.archive, **part.archive})


def _reader(archive_dir: str, pending: Mapping[str, str]) -> Callable[[str], str | None]:
    """A file of ours by its path: one the ladder has yet to write, else one in ``archive_dir``."""

    def read(path: str) -> str | None:
        if path in pending:
            return pending[path]
        data = archived(archive_dir, path)
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    return read


def _left(need: float, stats: CompactStats, chars_after: int) -> float:
    """What is still to free of ``need`` once the context is ``chars_after`` characters."""
    return need - (stats.chars_before - chars_after)


def _combined(
    first: CompactResult,
    steps: list[CompactResult],
    evictions: list[Eviction],
    history: list[SessionMessage],
    chars_after: int,
    started: float,
    need: float,
) -> CompactResult:
    """One result for the whole ladder: the first pass's calls and ids, each call's latest cut,
    an evicted turn's calls dropped to its file, the judge's figures summed."""
    by_id = {decision.tool_use_id: decision for decision in first.decisions}
    archive = dict(first.archive)
    media = dict(first.media)
    for step, evicted in zip([first, *steps], evictions):
        if step is not first:
            archive.update(step.archive)
            media.update(step.media)
            for decision in step.decisions:
                earlier = by_id.get(decision.tool_use_id)
                if earlier is None:
                    continue
                if decision.action != KEEP:
                    # An input an earlier pass moved stays moved (its marker is not moved again).
                    by_id[decision.tool_use_id] = replace(
                        decision, id=earlier.id,
                        input_archive_path=decision.input_archive_path or earlier.input_archive_path,
                    )
                elif decision.reason == INPUT_ARCHIVED:
                    # Its input moved in this pass (a call the first one pinned, or whose output it
                    # cut): the decision says so and names the input's file beside the output's.
                    by_id[decision.tool_use_id] = replace(
                        earlier, reason=INPUT_ARCHIVED, chars_freed=earlier.chars_freed + decision.chars_freed,
                        input_archive_path=decision.input_archive_path,
                    )
        archive.update(evicted.archive)
        for turn in evicted.turns:
            for call in turn.calls:
                earlier = by_id[call.tool_use_id]
                by_id[call.tool_use_id] = CallDecision(
                    earlier.id, call.tool_use_id, call.tool, earlier.keep_call, earlier.keep_result, DROP, OLD_TURN,
                    call.result_chars + input_chars(call.input), turn.path, earlier.input_archive_path,
                )
    decisions = [by_id[decision.tool_use_id] for decision in first.decisions]
    stats = replace(
        first.stats,
        messages_after=len(history),
        chars_after=chars_after,
        kept=sum(d.action == KEEP and d.reason != PINNED for d in decisions),
        truncated=sum(d.action == TRUNCATE for d in decisions),
        dropped=sum(d.action == DROP for d in decisions),
        pinned=sum(d.reason == PINNED for d in decisions),
        settled_by_rules=sum(d.reason not in _NOT_RULES for d in decisions),
        evicted_turns=sum(not turn.part and not turn.folded for evicted in evictions for turn in evicted.turns),
        evicted_parts=sum(turn.part for evicted in evictions for turn in evicted.turns),
        short_chars=max(0, round(_left(need, first.stats, chars_after))),
        # A later fold holds an earlier one's note, and counts its prompts with its own.
        prompts_folded=max((turn.folded for evicted in evictions for turn in evicted.turns), default=0),
        inputs_archived=first.stats.inputs_archived + sum(step.stats.inputs_archived for step in steps),
        media_archived=first.stats.media_archived + sum(step.stats.media_archived for step in steps),
        ms=(time.perf_counter() - started) * 1000,
    )
    for step in steps:
        for name in ("requests", "remembered", "estimated_tokens", "retries", "failed_batches", "input_tokens", "output_tokens"):
            setattr(stats, name, getattr(stats, name) + getattr(step.stats, name))
        stats.state_tokens = max(stats.state_tokens, step.stats.state_tokens)
    return CompactResult(history, decisions, first.calls, stats, archive, media)
