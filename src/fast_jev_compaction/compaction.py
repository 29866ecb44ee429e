"""The whole flow: pair, pin, settle by rules, ask the judge, decide, rebuild.

With a window (``options.window_tokens``) a pass frees what brings the context under its target
(``policy.chars_to_free``), down a ladder whose every rung is taken only when the ones above it
cannot reach the target: a) tool outputs, the rules' cuts first, then the budget policy's, then
every other judged output (``policy.budget_decisions(further=True)``); b) the long input fields
of old calls (``rebuild.trimmed_input``), oldest first; c) the images and documents attached to
messages older than the pinned window (``rebuild.moved_media``), oldest first. Without a window
the budget policy frees ``target_reduction`` of the judged outputs, as it always did. Every cut
is archived whole.
"""

from __future__ import annotations

import gc
import math
import time
from bisect import bisect_left
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterator, Mapping, Sequence, TypeVar

from .conversation.messages import SessionMessage, ToolResult
from .conversation.pairing import Pairing, ToolCall, is_pinned, pair_tool_calls
from .conversation.sizes import input_chars, measured
from .decide.archive import archive_path, archived
from .decide.decisions import DROP, INPUT_ARCHIVED, KEEP, PINNED, SMALL, TRUNCATE, UNDER_CUT, UNDER_TARGET, Action, CallDecision
from .decide.digest import IDS_SHARE, DigestShape
from .decide.focus import focus_terms
from .decide.markers import cut_note, foreign_marks_quoted, is_lead_note, without_lead_note
from .decide.pointers import Pointed, pointed_lines
from .decide.policy import (
    INPUT_KEEPING_RULES,
    MEDIA_CHARS,
    Scored,
    budget_decisions,
    chars_to_free,
    could_cut,
    threshold_decisions,
)
from .decide.rebuild import MIN_SAVING, Cut, cut_of, media_blocks, moved_media, rebuild, trimmed_input
from .decide.rules import Verdict, call_facts, settle
from .options import CompactOptions, validate_threshold
from .state.asker import answers_at_once, in_process
from .state.goal import goal_from_messages
from .stats import CompactStats

if TYPE_CHECKING:
    from .state.answer_cache import AnswerCache
    from .state.asker import AskResult, JevAsker
    from .state.windows import Request

T = TypeVar("T")


@dataclass(frozen=True)
class CompactResult:
    messages: list[SessionMessage]
    decisions: list[CallDecision]
    calls: list[ToolCall]
    stats: CompactStats
    # path -> full text, for every cut whose output or input field is to be saved
    # (options.archive_dir set).
    archive: dict[str, str] = field(default_factory=dict)
    # path -> bytes, for every attached image or document moved to the archive (rung c).
    media: dict[str, bytes] = field(default_factory=dict)


def shape_of(options: CompactOptions, goal: str = "") -> DigestShape:
    budget = max(options.digest_chars, options.truncate_head_chars)
    head = options.truncate_head_chars
    return DigestShape(budget=budget, head=head, ids=(budget - head) // IDS_SHARE, focus=focus_terms(goal))


async def compact(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
    cache: AnswerCache | None = None,
    pending: Mapping[str, str] | None = None,
    *,
    further: bool = True,
) -> CompactResult:
    """Compact ``messages``; any error propagates and the input is left as it was.

    With a ``cache``, the judge is asked only about calls whose answer it does not remember
    (answer_cache.py), and its new answers are remembered. ``pending``: the archive files
    (path -> text) an earlier pass of the same compaction made that are not written yet (the
    ladder's), whose marks are as genuine as those of files on disk.
    """
    started = time.perf_counter()
    opts = options or CompactOptions()
    validate_threshold(opts.keep_threshold)
    pairing = pair_tool_calls(messages, opts.preserve_recent_messages)
    results = pairing.results
    # By position (8 bytes a message, and a call), each input measured once: the rebuild measures
    # only the messages it changes, a drop's probe reads its input's size.
    sizes, input_sizes = measured(messages, pairing.calls)
    stats = CompactStats(
        messages_before=len(messages),
        chars_before=sum(sizes),
        calls=len(pairing.calls),
    )
    # Attached images and documents are in the context though not in the messages' characters.
    media_chars = MEDIA_CHARS * sum(media_blocks(message) for message in messages) if opts.window_tokens > 0 else 0
    need = chars_to_free(stats.chars_before + media_chars, opts)
    stats.need_chars = None if need is None else math.ceil(need)
    original = _originals(opts.archive_dir, pending or {})
    verdicts = (
        settle(call_facts(pairing.calls, cut_before(results, original)), len(messages)) if opts.use_rules else {}
    )
    shown = outputs_shown(results, original)
    to_judge = [call for call in pairing.candidates if call.tool_use_id not in verdicts]
    judging = _Judging(
        _without_lead_notes(messages), pairing, asker, opts, stats, results, opts.goal or goal_from_messages(messages)
    )
    answers = await _answers(judging, to_judge, cache)

    shape = shape_of(opts, judging.goal)
    # The lines of each Read that earlier outputs pointed at (path:line), kept first in its digest.
    pointers = pointed_lines(pairing.calls, results)
    # What each cut of a call does (rebuild.Cut), worked out once for the policy's probes and the
    # final decisions alike: by tool_use_id, released as each call is decided.
    probes: dict[str, _Probes] = {}

    def saved_at(call: ToolCall) -> str | None:
        """The file the call's output is saved to (a hash of the output), made when asked: one kept
        per probed call would stand at the policy's peak of memory."""
        # An empty output has nothing to read back: its marker says so instead of naming a file.
        text = results[call.tool_use_id].text
        return archive_path(opts.archive_dir, text) if opts.archive_dir and text else None

    def cut(call: ToolCall, action: Action) -> Cut:
        probe = probes.get(call.tool_use_id)
        if probe is None:
            probe = probes[call.tool_use_id] = _Probes()
        made = probe.truncated if action == TRUNCATE else probe.dropped
        if made is None:
            input_size = input_sizes[_position(pairing.calls, call)]
            made = cut_of(
                results[call.tool_use_id], call, action, shape, saved_at(call), input_size,
                pointers.get(call.tool_use_id, frozenset()),
            )
            if action == TRUNCATE:
                probe.truncated = made
            else:
                probe.dropped = made
        return made

    def freed(call: ToolCall, action: Action) -> int:
        return 0 if action == KEEP or call.pinned else cut(call, action).freed

    by_id: dict[str, CallDecision] = {}
    for call in pairing.calls:
        verdict = verdicts.get(call.tool_use_id)
        if call.pinned:
            by_id[call.tool_use_id] = CallDecision(call.id, call.tool_use_id, call.tool, 1.0, 1.0, KEEP, PINNED)
        elif verdict is not None:
            by_id[call.tool_use_id] = _ruled(call, verdict)
    for call in to_judge:
        if call.id not in answers:
            # Never asked: the policy keeps it whatever the judge would say.
            by_id[call.tool_use_id] = CallDecision(call.id, call.tool_use_id, call.tool, 1.0, 1.0, KEEP, UNDER_CUT)
    scored = [Scored(call, *answers[call.id]) for call in to_judge if call.id in answers]
    rule_names = {v.rule for v in verdicts.values()}
    # Both live on, in ``scored`` and ``by_id``: their maps go before the policy's probes.
    del answers, verdicts
    if opts.policy == "threshold":
        judged = threshold_decisions(scored, opts.keep_threshold)
    else:
        pool = pairing.candidates
        if need is None:
            target = opts.target_reduction * sum(call.result_chars for call in pool)
            already = sum(max(0, freed(call, d.action)) for call in pool if (d := by_id.get(call.tool_use_id)))
        else:
            target, already = need, _rules_up_to(need, pool, by_id, freed)
        judged = budget_decisions(
            scored,
            target_chars=target,
            already_freed=already,
            keep_floor=opts.keep_floor,
            freed_by=freed,
            messages_total=len(messages),
            further=further and need is not None,
        )
    by_id.update((d.tool_use_id, d) for d in judged)

    del scored, judged
    decisions: list[CallDecision] = []
    archive: dict[str, str] = {}
    media: dict[str, bytes] = {}
    # The rebuild's cuts only; a call's probes and its first decision go as it is
    # decided, so they never stand beside the final decisions whole (a compaction's peak).
    made: dict[str, str | None] = {}
    for call in pairing.calls:
        decision = by_id.pop(call.tool_use_id)
        if decision.action != KEEP:
            final = cut(call, decision.action)
            # Made whole, not by ``dataclasses.replace`` (which looks up every field by name), and
            # with the fields in order: (ids, action, reason, chars_freed, archive_path).
            ids = (decision.id, decision.tool_use_id, decision.tool, decision.keep_call, decision.keep_result)
            if final.freed <= 0:
                # Nothing to gain (an output shorter than its digest or its marker): it stays,
                # and the counts say so.
                decision = CallDecision(*ids, KEEP, SMALL)
            else:
                path = saved_at(call)
                decision = CallDecision(*ids, decision.action, decision.reason, final.freed, path)
                if final.text is not None:  # a truncation's cut (a drop's marker: rebuild.Cut)
                    made[call.tool_use_id] = final.text
                if path is not None:
                    archive[path] = results[call.tool_use_id].text
        probes.pop(call.tool_use_id, None)
        decisions.append(decision)
        if decision.reason == PINNED:
            stats.pinned += 1
        elif decision.action == KEEP:
            stats.kept += 1
        elif decision.action == TRUNCATE:
            stats.truncated += 1
        else:
            stats.dropped += 1
        if decision.reason in rule_names:
            stats.settled_by_rules += 1
    del by_id
    # Every cut is made: what they were worked out from goes before the rebuild, a compaction's
    # peak (an emptied dict keeps its table until cleared).
    probes.clear()
    pointers = Pointed({})
    inputs: dict[str, dict[str, Any]] = {}
    source = messages
    if need is not None and opts.policy != "threshold" and opts.archive_dir:
        short = need - sum(decision.chars_freed for decision in decisions)
        if short > 0:
            inputs = _inputs_up_to(short, pairing.calls, decisions, input_sizes, opts.archive_dir, archive)
            stats.inputs_archived = len(inputs)
            # A moved input's decision now frees its output's cut and its input's alike.
            short = need - sum(decision.chars_freed for decision in decisions)
        if short > 0 and media_chars:
            source = _media_up_to(short, messages, opts, media, stats)
    # Moved media leaves the messages' characters as they were: ``sizes`` still hold.
    out, taken = rebuild(source, decisions, pairing.calls, shape, made, sizes, inputs, shown)
    del made, inputs, source, shown

    stats.messages_after = len(out)
    stats.chars_after = stats.chars_before - taken
    if need is not None:
        stats.short_chars = max(0, math.ceil(need) - taken - stats.media_archived * MEDIA_CHARS)
    stats.ms = (time.perf_counter() - started) * 1000
    return CompactResult(out, decisions, list(pairing.calls), stats, archive, media)


def _originals(archive_dir: str | None, pending: Mapping[str, str]) -> Callable[[str], str | None]:
    """What a mark's path holds when it is a genuine file of this pass's archive (named by a hash
    of what it holds, ``archive.archived``, or one this compaction is about to write), else None;
    each path read once."""
    known: dict[str, str | None] = {}

    def original(path: str) -> str | None:
        if path not in known:
            if path in pending:
                known[path] = pending[path]
            else:
                data = archived(archive_dir, path) if archive_dir else None
                known[path] = None if data is None else data.decode("utf-8", errors="replace")
        return known[path]

    return original


def cut_before(results: Mapping[str, ToolResult], original: Callable[[str], str | None]) -> frozenset[str]:
    """The tool_use_ids of the outputs an earlier pass cut: each closes with a note naming a
    genuine archive file (``original``) that holds more than the output, as many characters as
    the note says (its whole original). An output that only looks cut (our prefix, a note naming
    any other file or size) is not one, and is judged like any other."""
    cut: set[str] = set()
    for tool_use_id, result in results.items():
        note = cut_note(result.text)
        saved = original(note[0]) if note else None
        if note and saved is not None and len(saved) > len(result.text) and note[1] in (None, len(saved)):
            cut.add(tool_use_id)
    return frozenset(cut)


def outputs_shown(results: Mapping[str, ToolResult], original: Callable[[str], str | None]) -> dict[str, str]:
    """By tool_use_id, the text an output that imitates our marks goes back with, its look-alikes
    quoted (``markers.foreign_marks_quoted``); our own notes in it are those naming a genuine
    archive file (``original``), or none. The archive keeps the output as it was."""
    shown: dict[str, str] = {}
    for tool_use_id, result in results.items():
        text = foreign_marks_quoted(result.text, lambda path: original(path) is not None)
        if text is not result.text:
            shown[tool_use_id] = text
    return shown


def _rules_up_to(
    need: float, pool: Sequence[ToolCall], by_id: dict[str, CallDecision], freed: Callable[[ToolCall, Action], int]
) -> int:
    """The rules' cuts a pass with a window makes before the budget policy's, and what they free.

    Least valuable first: the drops of what a later call made redundant, then the truncations
    of capped logs and edit views, each oldest first, until ``need`` is freed; the others stay
    (``UNDER_TARGET``), so a context already under its target loses nothing.
    """
    ruled = [call for call in pool if (d := by_id.get(call.tool_use_id)) is not None and d.action != KEEP]
    ruled.sort(key=lambda call: by_id[call.tool_use_id].action != DROP)
    done = 0
    for call in ruled:
        decision = by_id[call.tool_use_id]
        if done < need:
            done += max(0, freed(call, decision.action))
        else:
            by_id[call.tool_use_id] = CallDecision(
                decision.id, decision.tool_use_id, decision.tool, decision.keep_call, decision.keep_result, KEEP, UNDER_TARGET
            )
    return done


def _inputs_up_to(
    short: float,
    calls: Sequence[ToolCall],
    decisions: list[CallDecision],
    input_sizes: Sequence[int],
    archive_dir: str,
    archive: dict[str, str],
) -> dict[str, dict[str, Any]]:
    """Rung b: the long input fields of unpinned calls move to the archive, oldest call first,
    until ``short`` more characters are freed. Each such call's decision says so
    (``INPUT_ARCHIVED``, its output's action and what both free); its bodies join ``archive``.
    Its ``input_archive_path`` names its largest moved field's file, so the decision log shows
    where the input went beside a cut output's ``archive_path`` (its marker's file).

    ``decisions`` are in the order of ``calls`` (pairing's); a dropped call has left already,
    and the calls a rule keeps for what they are (``policy.INPUT_KEEPING_RULES``) stay whole.
    """
    inputs: dict[str, dict[str, Any]] = {}
    for position, call in enumerate(calls):
        if short <= 0:
            break
        decision = decisions[position]
        if call.pinned or decision.action == DROP or decision.reason in INPUT_KEEPING_RULES:
            continue
        trimmed = trimmed_input(call.tool, call.input, archive_dir)
        if trimmed is None:
            continue
        gained = input_sizes[position] - input_chars(trimmed.input)
        if gained < MIN_SAVING:
            continue
        decisions[position] = CallDecision(
            decision.id, decision.tool_use_id, decision.tool, decision.keep_call, decision.keep_result,
            decision.action, INPUT_ARCHIVED, decision.chars_freed + gained, decision.archive_path,
            max(trimmed.files, key=lambda path: len(trimmed.files[path])),
        )
        inputs[call.tool_use_id] = trimmed.input
        archive.update(trimmed.files)
        short -= gained
    return inputs


def _media_up_to(
    short: float, messages: Sequence[SessionMessage], opts: CompactOptions, media: dict[str, bytes], stats: CompactStats
) -> Sequence[SessionMessage]:
    """Rung c: the images and documents attached to messages older than the pinned window move
    to the archive, oldest first, until ``short`` more characters are freed (each counted at
    ``policy.MEDIA_CHARS``); the messages with a note in their place, the others as they are."""
    out: list[SessionMessage] | None = None
    total = len(messages)
    for position, message in enumerate(messages):
        if short <= 0:
            break
        if is_pinned(position, total, opts.preserve_recent_messages) or not media_blocks(message):
            continue
        moved = moved_media(message, opts.archive_dir or "")
        if moved is None:
            continue
        if out is None:
            out = list(messages)
        out[position] = moved.message
        media.update(moved.files)
        stats.media_archived += moved.count
        short -= moved.count * MEDIA_CHARS
    return messages if out is None else out


_CALL_INDEX = attrgetter("call_index")


def _position(calls: Sequence[ToolCall], call: ToolCall) -> int:
    """Where ``call`` is in ``calls``, pairing's: in transcript order, so by message."""
    at = bisect_left(calls, call.call_index, key=_CALL_INDEX)
    while calls[at] is not call:
        at += 1
    return at


@dataclass(slots=True)
class _Probes:
    """One call's cuts, each made once. Two slots, not a dict by action: every call probed has
    one while the policy weighs them all."""

    truncated: Cut | None = None
    dropped: Cut | None = None


def _ruled(call: ToolCall, verdict: Verdict) -> CallDecision:
    # A rule is certain either way; the probabilities say so, and the reason names the rule.
    value = 1.0 if verdict.action == KEEP else 0.0
    return CallDecision(call.id, call.tool_use_id, call.tool, value, value, verdict.action, verdict.rule)


def _without_lead_notes(messages: Sequence[SessionMessage]) -> Sequence[SessionMessage]:
    """The messages as the judge reads them: without the lead line an earlier pass put first (the
    engine joins it to the first prompt), which is ours, not the session's, and would cost every
    later pass its tokens. The same positions, so the pairing still holds."""
    if not any(is_lead_note(message.text) for message in messages):
        return messages
    return [
        replace(message, text=without_lead_note(message.text)) if is_lead_note(message.text) else message
        for message in messages
    ]


@dataclass(frozen=True)
class _Judging:
    """What asking the judge about some calls needs, shared by :func:`_answers` and :func:`_ask`."""

    messages: Sequence[SessionMessage]
    pairing: Pairing
    asker: Any
    opts: CompactOptions
    stats: CompactStats
    results: dict[str, ToolResult]
    goal: str


async def _answers(judging: _Judging, to_judge: list[ToolCall], cache: AnswerCache | None) -> dict[str, tuple[float, float]]:
    """The judge's (keep_call, keep_result) by call id: remembered answers first, then the judge.

    An in-process judge scores every call (it costs no request). A remote judge is asked only
    about calls whose answer can change the outcome in this pass or a later one: under the budget
    policy, those ``policy.could_cut(..., remote=True)`` names; the others are missing from the
    answers and stay whole.
    """
    asker, opts = judging.asker, judging.opts
    if in_process(asker):
        if not to_judge:
            return {}
        # It reads the messages themselves (no state, no request) and scores only these calls.
        scores: dict[str, tuple[float, float]] = asker.score_calls(
            judging.messages, judging.pairing, judging.goal, only=to_judge
        )
        return {call.id: scores[call.tool_use_id] for call in to_judge}
    to_judge = [call for call in to_judge if could_cut(call, len(judging.messages), opts, remote=True)]
    if cache is None or not to_judge:
        return await _ask(judging, to_judge) if to_judge else {}
    from .state.answer_cache import answer_key, judge_scope, situations

    scope = judge_scope(asker)
    where = situations(judging.pairing.calls)
    goal = given_goal(judging.goal, judging.messages)
    keys = {
        call.id: answer_key(call, judging.results[call.tool_use_id].text, scope, where[call.tool_use_id], goal)
        for call in to_judge
    }
    remembered = cache.get(keys.values())
    answers = {call.id: remembered[keys[call.id]] for call in to_judge if keys[call.id] in remembered}
    judging.stats.remembered = len(answers)
    rest = [call for call in to_judge if call.id not in answers]
    fresh = await _ask(judging, rest) if rest else {}
    cache.put({keys[call_id]: scores for call_id, scores in fresh.items()})
    return {**answers, **fresh}


def given_goal(goal: str, messages: Sequence[SessionMessage]) -> str:
    """The part of a pass's ``goal`` a remembered answer is keyed by: all of it when the user
    gave it (``--goal``, ``/compact <instructions>``), so a new focus reaches the judge; none when
    it is the recent prompts alone, which move with every prompt and would have a pass over a
    grown session ask everything again."""
    return "" if goal == goal_from_messages(messages) else goal


async def _ask(judging: _Judging, to_judge: list[ToolCall]) -> dict[str, tuple[float, float]]:
    """A remote judge's (keep_call, keep_result) for each call in ``to_judge``, by call id."""
    # Only a judge that takes states and requests needs these: an in-process one (the hook's
    # usual judge) never imports them.
    from .state.answers import read_noul_answers
    from .state.batches import run_bounded
    from .state.questions import REQUEST_OVERHEAD_TOKENS, batch_questions, question_tokens
    from .state.windows import WINDOWED, plan_requests

    messages, pairing, asker, opts, stats = judging.messages, judging.pairing, judging.asker, judging.opts, judging.stats
    question_cost = {call.id: question_tokens(call) for call in to_judge}
    requests = plan_requests(
        messages, pairing, to_judge, judging.goal, opts.preserve_recent_messages,
        opts.max_state_tokens, opts.max_request_tokens, question_cost,
    )
    stats.state_tokens = max(request.state_tokens for request in requests)
    stats.state_stage = requests[0].stage
    stats.requests = len(requests)
    stats.windows = len({id(request.state) for request in requests}) if requests[0].stage == WINDOWED else 0
    stats.estimated_tokens = sum(
        REQUEST_OVERHEAD_TOKENS + request.state_tokens + sum(question_cost[c.id] for c in request.calls)
        for request in requests
    )

    def job(request: Request) -> Any:
        questions = batch_questions(request.calls)

        async def ask() -> tuple[AskResult, dict[str, float]]:
            result = await asker.ask(request.state, questions)
            # Validate inside the job so a bad answer stops the queue like any failure.
            return result, read_noul_answers(result.answers, list(questions))

        return ask

    answers: dict[str, tuple[float, float]] = {}
    jobs = [job(request) for request in requests]
    for request, (result, values) in zip(requests, await run_bounded(jobs, opts.max_concurrent_requests)):
        stats.retries += result.retries
        stats.input_tokens += result.usage.input_tokens
        stats.output_tokens += result.usage.output_tokens
        for call in request.calls:
            answers[call.id] = (values[f"call_{call.id}"], values[f"result_{call.id}"])
    return answers


def compact_sync(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
    cache: AnswerCache | None = None,
) -> CompactResult:
    """:func:`compact` for callers without an event loop."""
    return run_sync(compact(messages, asker, options, cache), waits=not answers_at_once(asker))


def run_sync(coroutine: Coroutine[Any, Any, T], *, waits: bool = True) -> T:
    """Run ``coroutine`` to its end.

    ``waits=False`` is for a compaction whose judge answers at once (``asker.answers_at_once``):
    it never waits on anything, so it is stepped once, without asyncio (tens of milliseconds to
    import, and a fraction of a millisecond per loop). Otherwise a fresh loop
    runs it; not ``asyncio.run``, whose SIGINT handler, when restored, makes Python 3.11's
    ``signal`` module format the repr of the finished task, result included, which for a large
    conversation takes longer than the compaction itself.
    """
    if not waits:
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        coroutine.close()
        raise RuntimeError("a judge that answers at once waited on an event loop")
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for one pass, for a process that makes one (the CLI, the
    hook, the bench timing them).

    Nearly everything a pass reads or makes lives to its end, so each full collection walks the
    whole conversation again: with the collector on, 10x the messages cost about 15x the CPU
    (``fast-jev bench --synthetic 5000 --synthetic 50000``). A pass makes few cycles, and the
    collector is on again, as it was, once the pass is over. Not inside :func:`compact`: a
    long-lived caller decides for itself.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
