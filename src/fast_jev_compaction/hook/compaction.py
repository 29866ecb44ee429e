"""One compaction as the hook runs it: the event's messages through the core, the gate, the
answer's turn shape and size; an ``Outcome`` whatever happens short of an exception.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Sequence

from ..markers import LEAD_NOTE
from ..messages import SessionMessage
from .answer import STDOUT_SOFT_LIMIT, answer_size, fallback_answer, file_answer, skip_answer, toast_text, wire_messages, wired
from .answer_file import ANSWERS_DIR, remove_stale, write_messages
from .archive import ARCHIVE_DIR, saved_or_unpointed
from .config import resolve_hook_config
from .deadline import Deadline
from .event import HookEvent
from .gate import after_pass, before_pass, engine_limit_of, unmeasured_tokens, window_of
from .judge import answer_cache, build_asker
from .log import HookLog
from .media import with_media
from .meta import read_hung_texts, transcript_file
from .outcome import Answer, Outcome
from .tally import Tally
from .turns import carried_by, regroup, replies, turn_problems


def in_flight_preserve(messages: Sequence[SessionMessage], preserve: int) -> int:
    """Widen the recent-message window so a trailing tool exchange stays verbatim.

    Auto compaction can fire mid-turn, after a tool_result and before the model has read it.
    Dropping or truncating that pair would make the model ask for the tool again, so every
    message from the assistant message holding the trailing calls to the end is pinned.
    """
    if not messages:
        return preserve
    # Parallel calls come as one message per call and per result: the whole trailing run counts.
    trailing_ids: set[str] = set()
    role = messages[-1].role
    for message in reversed(messages):
        blocks = message.toolResults if role == "user" else message.toolUses
        if message.role != role or not blocks:
            break
        trailing_ids.update(b.tool_use_id for b in blocks)
    if not trailing_ids:
        return preserve
    first = len(messages) - 1
    for index in range(len(messages) - 1, -1, -1):
        if any(u.tool_use_id in trailing_ids for u in messages[index].toolUses):
            first = min(first, index)
    return max(preserve, len(messages) - first)


async def _compact(
    messages: list[SessionMessage], asker: Any, options: Any, closer: Any, cache: Any = None, deadline: Deadline | None = None
) -> Any:
    """The compaction; with a ``deadline`` (a judge that waits on the network) it stops in time."""
    from ..compaction import compact

    try:
        if deadline is None:  # an in-process judge never waits: the watchdog covers it
            return await compact(messages, asker, options, cache)
        import asyncio

        try:
            async with asyncio.timeout(deadline.compaction_budget_s()):
                return await compact(messages, asker, options, cache)
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
    if window is not None:  # the pass frees what the window needs (policy.chars_to_free)
        options = replace(options, window_tokens=window.size, context_tokens=window.tokens)
    goal = options.goal
    preserve = in_flight_preserve(messages, options.preserve_recent_messages)
    if preserve != options.preserve_recent_messages:
        options = replace(options, preserve_recent_messages=preserve)
    asker, closer, judge = build_asker(config, log)
    if tally is not None:
        asker = tally.watch(asker)
    if log.directory is not None:  # without a data folder nothing is archived: markers say to re-run
        options = replace(options, archive_dir=str(log.directory / ARCHIVE_DIR))
    # Before the core, not after: a result's image note is then part of its text, so a kept
    # result shows it, a cut one keeps it in its saved file, and a dropped one's marker points
    # at a file that names the image.
    messages = with_media(event, options.archive_dir, log.error)
    from ..compaction import run_sync

    # The local judge answers in this process without waiting: no event loop to start.
    waits = judge != "local"
    # Remembered answers save remote requests; the embedded judge scores in process, cheaply, and
    # its answers must not stand in for Jev's (the cache is keyed by the asker seen here).
    cache = answer_cache(log) if waits else None
    result = run_sync(_compact(messages, asker, options, closer, cache, deadline if waits else None), waits=waits)
    result = saved_or_unpointed(result, messages, options, log.error)

    lines.extend(decision_log_lines(result.decisions))
    summary = summarize(result.stats)
    gate = after_pass(
        result.stats, window, event.trigger, target_percent=config.target_percent,
        min_freed_percent=config.min_freed_percent, min_reduction_ratio=config.min_reduction_ratio,
        # A subagent's transcript is not what the main conversation's figures measure.
        engine=None if event.agentId else engine_limit_of(event.context, unmeasured),
    )
    if gate.verdict == "skip":
        return Outcome(skip_answer(gate.reason, lines), "skipped", f"{gate.reason}: {summary}", result, goal, judge)
    if gate.verdict == "fallback":
        reason = f"{gate.reason}: {summary}"
        return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, gate.category)

    out = regroup(result.messages, carried_by(messages, _hung_texts(event, messages, log)), replies(messages))
    # The rebuilt history lives on as ``out``; the outcome's record reads the decisions, calls
    # and figures only, so the turns regroup merged are not kept beside it while it is wired.
    result = replace(result, messages=[])
    if (result.stats.truncated or result.stats.dropped) and not any(m.text == LEAD_NOTE for m in out):
        # Once per history: a later pass finds it and adds none (the engine merges it into the
        # first user message of the request).
        out = [SessionMessage(role="user", text=LEAD_NOTE), *out]
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
