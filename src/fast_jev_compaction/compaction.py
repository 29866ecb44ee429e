"""The whole flow: pair, pin, settle by rules, ask the judge, decide, rebuild."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .answers import read_noul_answers
from .archive import archive_path
from .asker import AskResult, JevAsker
from .batches import run_bounded
from .decisions import DROP, KEEP, PINNED, SMALL, TRUNCATE, Action, CallDecision
from .digest import DigestShape
from .errors import FittingError
from .fitting import fit_state
from .goal import goal_from_messages
from .messages import SessionMessage, ToolResult
from .options import CompactOptions, validate_threshold
from .pairing import Pairing, ToolCall, pair_tool_calls
from .policy import Scored, budget_decisions, threshold_decisions
from .questions import REQUEST_OVERHEAD_TOKENS, batch_calls, batch_questions, question_tokens
from .rebuild import apply_decisions, freed_chars
from .rules import Verdict, call_facts, settle
from .stats import CompactStats, message_chars


@dataclass(frozen=True)
class CompactResult:
    messages: list[SessionMessage]
    decisions: list[CallDecision]
    calls: list[ToolCall]
    stats: CompactStats
    # path -> full output, for every cut whose output is to be saved (options.archive_dir set).
    archive: dict[str, str] = field(default_factory=dict)


def shape_of(options: CompactOptions) -> DigestShape:
    return DigestShape(budget=max(options.digest_chars, options.truncate_head_chars), head=options.truncate_head_chars)


async def compact(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
) -> CompactResult:
    """Compact ``messages``; any error propagates and the input is left as it was."""
    started = time.perf_counter()
    opts = options or CompactOptions()
    validate_threshold(opts.keep_threshold)
    pairing = pair_tool_calls(messages, opts.preserve_recent_messages)
    results: dict[str, ToolResult] = {r.tool_use_id: r for m in messages for r in m.toolResults or ()}
    stats = CompactStats(
        messages_before=len(messages),
        chars_before=sum(message_chars(m) for m in messages),
        calls=len(pairing.calls),
    )
    verdicts = settle(call_facts(pairing.calls, {k: r.text for k, r in results.items()})) if opts.use_rules else {}
    to_judge = [call for call in pairing.candidates if call.tool_use_id not in verdicts]
    answers = await _ask(messages, pairing, to_judge, asker, opts, stats) if to_judge else {}

    shape = shape_of(opts)

    def saved_at(call: ToolCall) -> str | None:
        return archive_path(opts.archive_dir, results[call.tool_use_id].text) if opts.archive_dir else None

    def freed(call: ToolCall, action: Action) -> int:
        probe = CallDecision(call.id, call.tool_use_id, call.tool, 0.0, 0.0, action, "", 0, saved_at(call))
        return freed_chars(results, call, probe, shape)

    by_id: dict[str, CallDecision] = {}
    for call in pairing.calls:
        verdict = verdicts.get(call.tool_use_id)
        if call.pinned:
            by_id[call.tool_use_id] = CallDecision(call.id, call.tool_use_id, call.tool, 1.0, 1.0, KEEP, PINNED)
        elif verdict is not None:
            ruled = _ruled(call, verdict)
            if ruled.action != KEEP and freed(call, ruled.action) <= 0:
                # Redundant, but smaller than the marker that would replace it: it stays.
                ruled = replace(ruled, action=KEEP, keep_call=1.0, keep_result=1.0, reason=SMALL)
            by_id[call.tool_use_id] = ruled
    scored = [Scored(call, *answers[call.id]) for call in to_judge]
    if opts.policy == "threshold":
        judged = threshold_decisions(scored, opts.keep_threshold)
    else:
        pool = [call for call in pairing.candidates]
        judged = budget_decisions(
            scored,
            target_chars=opts.target_reduction * sum(call.result_chars for call in pool),
            already_freed=sum(freed(call, d.action) for call in pool if (d := by_id.get(call.tool_use_id))),
            keep_floor=opts.keep_floor,
            freed_by=freed,
        )
    by_id.update((d.tool_use_id, d) for d in judged)

    decisions: list[CallDecision] = []
    archive: dict[str, str] = {}
    for call in pairing.calls:
        decision = by_id[call.tool_use_id]
        if decision.action != KEEP:
            path = saved_at(call)
            decision = replace(decision, archive_path=path)
            decision = replace(decision, chars_freed=freed_chars(results, call, decision, shape))
            if decision.chars_freed <= 0:
                # Nothing to gain (an output shorter than its digest or its marker): it stays,
                # and the counts say so.
                decision = replace(decision, action=KEEP, reason=SMALL, archive_path=None, chars_freed=0)
            elif path is not None:
                archive[path] = results[call.tool_use_id].text
        decisions.append(decision)
    out = apply_decisions(messages, decisions, pairing.calls, shape)

    stats.messages_after = len(out)
    stats.chars_after = sum(message_chars(m) for m in out)
    for decision in decisions:
        if decision.reason == PINNED:
            stats.pinned += 1
        elif decision.action == KEEP:
            stats.kept += 1
        elif decision.action == TRUNCATE:
            stats.truncated += 1
        else:
            stats.dropped += 1
        if decision.reason in {v.rule for v in verdicts.values()}:
            stats.settled_by_rules += 1
    stats.ms = (time.perf_counter() - started) * 1000
    return CompactResult(out, decisions, list(pairing.calls), stats, archive)


def _ruled(call: ToolCall, verdict: Verdict) -> CallDecision:
    # A rule is certain either way; the probabilities say so, and the reason names the rule.
    value = 1.0 if verdict.action == KEEP else 0.0
    return CallDecision(call.id, call.tool_use_id, call.tool, value, value, verdict.action, verdict.rule)


async def _ask(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    to_judge: list[ToolCall],
    asker: Any,
    opts: CompactOptions,
    stats: CompactStats,
) -> dict[str, tuple[float, float]]:
    """The judge's (keep_call, keep_result) for each call in ``to_judge``, by call id."""
    goal = opts.goal or goal_from_messages(messages)
    score_calls = getattr(asker, "score_calls", None)
    if callable(score_calls):
        # An in-process judge reads the messages themselves: no state to fit, no request.
        scores: dict[str, tuple[float, float]] = score_calls(messages, pairing, goal)
        return {call.id: scores[call.tool_use_id] for call in to_judge}

    largest_question = max(question_tokens(call) for call in to_judge)
    state_budget = opts.max_request_tokens - REQUEST_OVERHEAD_TOKENS - largest_question
    if state_budget < 1:
        raise FittingError("request budget leaves no room for state and questions")
    fitted = fit_state(messages, pairing, goal, opts.preserve_recent_messages, min(opts.max_state_tokens, state_budget))
    batches = batch_calls(to_judge, fitted.tokens, opts.max_request_tokens)
    stats.state_tokens, stats.state_stage, stats.requests = fitted.tokens, fitted.stage, len(batches)

    def job(batch: list[ToolCall]) -> Any:
        questions = batch_questions(batch)

        async def ask() -> tuple[AskResult, dict[str, float]]:
            result = await asker.ask(fitted.state, questions)
            # Validate inside the job so a bad answer stops the queue like any failure.
            return result, read_noul_answers(result.answers, list(questions))

        return ask

    answers: dict[str, tuple[float, float]] = {}
    for batch, (result, values) in zip(batches, await run_bounded([job(b) for b in batches], opts.max_concurrent_requests)):
        stats.retries += result.retries
        stats.input_tokens += result.usage.input_tokens
        stats.output_tokens += result.usage.output_tokens
        for call in batch:
            answers[call.id] = (values[f"call_{call.id}"], values[f"result_{call.id}"])
    return answers


def compact_sync(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
) -> CompactResult:
    """:func:`compact` for callers without an event loop."""
    return asyncio.run(compact(messages, asker, options))
