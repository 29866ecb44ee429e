"""One compaction as the hook runs it: the event's messages through the core, the gate, the
answer's turn shape and size; an ``Outcome`` whatever happens short of an exception.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from ..conversation.messages import SessionMessage
from ..decide.archive import as_marked
from ..decide.markers import is_lead_note, lead_note
from ..decide.turn_eviction import in_flight_preserve
from .answer import STDOUT_SOFT_LIMIT, answer_size, fallback_answer, file_answer, skip_answer, toast_text, wire_messages, wired
from .answer_file import ANSWERS_DIR, remove_stale, write_messages
from .archive import ARCHIVE_DIR, saved_or_unpointed
from .config import resolve_hook_config
from .deadline import Deadline
from .event import HookEvent
from .gate import ENGINE_TRIGGERS, after_pass, before_pass, engine_limit_of, unmeasured_tokens, window_of
from .judge import answer_cache, build_asker
from .log import HookLog
from .media import with_media
from .meta import read_hung_texts, transcript_file
from .outcome import Answer, Outcome
from .tally import Tally
from .turns import carried_by, regroup, replies_after, turn_problems


async def _compact(
    messages: list[SessionMessage], asker: Any, options: Any, closer: Any, cache: Any = None, deadline: Deadline | None = None
) -> Any:
    """The compaction, down the eviction ladder as far as the window needs; with a ``deadline``
    (a judge that waits on the network) it stops in time."""
    from ..ladder import compact_to_fit

    try:
        if deadline is None:  # an in-process judge never waits: the watchdog covers it
            return await compact_to_fit(messages, asker, options, cache)
        import asyncio

        try:
            async with asyncio.timeout(deadline.compaction_budget_s()):
                return await compact_to_fit(messages, asker, options, cache)
        except TimeoutError:
            raise deadline.error() from None
    finally:
        if closer is not None:
            await closer()


def run_compaction(
    event: HookEvent, log: HookLog, tally: Tally | None = None, deadline: Deadline | None = None
) -> Outcome:
    from ..stats import decision_log_lines, summarize

    config = resolve_hook_config(event.options)
    for note in config.notes:
        log.info(note)
    deadline = deadline or Deadline(config.timeout_seconds)
    if log.directory is not None:  # answer files an earlier run left: one the mod never read
        remove_stale(log.directory / ANSWERS_DIR)
    messages = list(event.messages)
    lines: list[str] = []
    if event.agentId:
        # Subagent transcripts are compacted too; the line says whose it was.
        lines.append(f"compacting subagent {event.agentId}")
    if not messages:
        return Outcome(skip_answer("nothing to compact", lines), "skipped", "nothing to compact")

    # A subagent's messages are not what the main conversation's figures measure.
    unmeasured = 0 if event.agentId else unmeasured_tokens(messages)
    window = window_of(event.context, unmeasured)
    early = before_pass(window, event.trigger, config.target_percent)
    if early is not None:
        return Outcome(skip_answer(early.reason, lines), "skipped", early.reason)

    options = config.compact_options(messages, event.instructions)
    # The pass frees what the window needs (policy.chars_to_free): for the engine's own
    # compaction, the window it fires in (its compaction window, with the output that made it
    # fire), not the model's, which may be many times larger.
    engine = None if event.agentId else engine_limit_of(event.context, unmeasured)
    aimed = engine.window if engine is not None and event.trigger in ENGINE_TRIGGERS else window
    # A `/compact` typed under the target asks for a compaction the window does not need: it
    # gets the budget without a window (targetReduction), as before the window-aware budget.
    asked_anyway = event.trigger == "manual" and aimed is not None and aimed.percent < config.target_percent
    if aimed is not None and not asked_anyway:
        options = replace(options, window_tokens=aimed.size, context_tokens=aimed.tokens)
    goal = options.goal
    preserve = in_flight_preserve(messages, options.preserve_recent_messages)
    if preserve != options.preserve_recent_messages:
        options = replace(options, preserve_recent_messages=preserve)
    asker, closer, judge = build_asker(config, log)
    if tally is not None:
        asker = tally.watch(asker)
    if log.directory is not None:  # without a data folder nothing is archived: markers say to re-run
        options = replace(options, archive_dir=as_marked(log.directory / ARCHIVE_DIR))
    # Before the core, not after: a result's image note is then part of its text, so a kept
    # result shows it, a cut one keeps it in its saved file, and a dropped one's marker points
    # at a file that names the image.
    messages = with_media(event, options.archive_dir, log.error)
    from ..compaction import collector_paused, run_sync

    # The local judge answers in this process without waiting: no event loop to start.
    waits = judge != "local"
    # Remembered answers save remote requests; the embedded judge scores in process, cheaply, and
    # its answers must not stand in for Jev's (the cache is keyed by the asker seen here).
    cache = answer_cache(log) if waits else None
    with collector_paused():
        result = run_sync(_compact(messages, asker, options, closer, cache, deadline if waits else None), waits=waits)
    result = saved_or_unpointed(result, messages, options, log.error)

    lines.extend(decision_log_lines(result.decisions))
    summary = summarize(result.stats)
    gate = after_pass(
        result.stats, window, event.trigger, target_percent=config.target_percent,
        min_freed_percent=config.min_freed_percent, min_reduction_ratio=config.min_reduction_ratio,
        # A subagent's transcript is not what the main conversation's figures measure.
        engine=engine,
    )
    if gate.verdict == "skip":
        return Outcome(skip_answer(gate.reason, lines), "skipped", f"{gate.reason}: {summary}", result, goal, judge)
    if gate.verdict == "fallback":
        reason = f"{gate.reason}: {summary}"
        return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, gate.category)

    # Turns by the responses of the messages the ladder left, not of its input: an evicted turn
    # is one index line, and two replies its drops made adjacent stay apart.
    out = regroup(result.messages, carried_by(messages, _hung_texts(event, messages, log), result.messages),
                  replies_after(result.messages, messages))
    # The rebuilt history lives on as ``out``; the outcome's record reads the decisions, calls
    # and figures only, so the turns regroup merged are not kept beside it while it is wired.
    result = replace(result, messages=[])
    stats = result.stats
    moved = stats.truncated or stats.dropped or stats.evicted_turns or stats.evicted_parts or stats.prompts_archived
    moved = moved or stats.prompts_folded or stats.command_output_cut
    if moved and not any(is_lead_note(m.text) for m in out):
        # Once per history: a later pass finds it and adds none (the engine merges it into the
        # first user message of the request). It names the archive folder once a file is in it.
        out = [SessionMessage(role="user", text=lead_note(options.archive_dir if result.archive else None)), *out]
    toast = toast_text(result.stats, gate.reason)
    answer: Answer = {"action": "replace", "messages": [], "toast": toast, "log": lines}
    # Sized one message at a time: a history too large to send is never built as one text.
    compact = answer_size(answer, wired(out, False), STDOUT_SOFT_LIMIT) > STDOUT_SOFT_LIMIT
    in_file = compact and answer_size(answer, wired(out, True), STDOUT_SOFT_LIMIT) > STDOUT_SOFT_LIMIT
    if not in_file:
        answer["messages"] = wire_messages(out, compact=compact)
    problems = turn_problems(wired(out, True) if in_file else answer["messages"], messages)
    if problems:
        log.error("tool results out of place: " + "; ".join(problems[:20]))
        reason = f"the pruned history would separate tool results from their calls ({problems[0]})"
        return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, "internal")
    if in_file:
        try:
            if log.directory is None:
                raise OSError("no plugin data folder")
            path, size = write_messages(log.directory, wired(out, True))
        except (OSError, ValueError) as exc:  # ValueError: a NUL or surrogate in the folder's name
            log.error(f"answer file not written ({exc})")
            reason = f"the pruned history is too large for the hook's output and could not be saved to a file: {summary}"
            return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, "budget")
        log.info(f"the pruned history went to {path} ({size} bytes): too large for the hook's output")
        answer = file_answer(answer, str(path), size)
    return Outcome(answer, "replaced", summary, result, goal, judge)


def _hung_texts(event: HookEvent, messages: list[SessionMessage], log: HookLog) -> dict[str, str]:
    """Engine text hung on the messages, by handle, from the session transcript; none for a subagent."""
    if event.agentId:
        return {}
    try:
        path = transcript_file(event.pluginData, event.sessionId, os.environ)
        if path is None:
            return {}
        return read_hung_texts(path, [m.handle for m in messages if m.handle is not None])
    except (OSError, ValueError) as exc:  # ValueError: a NUL or surrogate in a path or id
        log.error(f"transcript not read ({exc}); text hung on rebuilt messages is left out")
        return {}
