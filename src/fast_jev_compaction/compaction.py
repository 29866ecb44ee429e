"""The whole flow: pair, pin, fit, ask, decide, rebuild (upstream §6.6)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .answers import read_noul_answers
from .asker import AskResult, JevAsker
from .batches import run_bounded
from .decisions import CallDecision, decide_call
from .errors import FittingError
from .fitting import fit_state
from .goal import goal_from_messages
from .messages import SessionMessage
from .options import CompactOptions, validate_threshold
from .pairing import ToolCall, pair_tool_calls
from .questions import REQUEST_OVERHEAD_TOKENS, batch_calls, batch_questions, question_tokens
from .rebuild import apply_decisions, truncated_result_text
from .stats import CompactStats, input_chars, message_chars


@dataclass(frozen=True)
class CompactResult:
    messages: list[SessionMessage]
    decisions: list[CallDecision]
    calls: list[ToolCall]
    stats: CompactStats


async def compact(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
    archive: Mapping[str, str] | None = None,
) -> CompactResult:
    """Compact ``messages``; any error propagates and the input is left as it was.

    ``archive`` maps a tool_use_id to where the caller saves that call's full result, so the
    truncation note can point there.
    """
    started = time.perf_counter()
    opts = options or CompactOptions()
    validate_threshold(opts.keep_threshold)
    pairing = pair_tool_calls(messages, opts.preserve_recent_messages)
    candidates = pairing.candidates
    stats = CompactStats(
        messages_before=len(messages),
        chars_before=sum(message_chars(m) for m in messages),
        calls=len(pairing.calls),
    )

    answers: dict[str, tuple[float, float]] = {}
    if candidates:
        largest_question = max(question_tokens(call) for call in candidates)
        state_budget = opts.max_request_tokens - REQUEST_OVERHEAD_TOKENS - largest_question
        if state_budget < 1:
            raise FittingError("request budget leaves no room for state and questions")
        goal = opts.goal or goal_from_messages(messages)
        fitted = fit_state(
            messages, pairing, goal, opts.preserve_recent_messages, min(opts.max_state_tokens, state_budget)
        )
        batches = batch_calls(candidates, fitted.tokens, opts.max_request_tokens)
        stats.state_tokens, stats.state_stage, stats.requests = fitted.tokens, fitted.stage, len(batches)

        def job(batch: list[ToolCall]):
            questions = batch_questions(batch)

            async def ask() -> tuple[AskResult, dict[str, float]]:
                result = await asker.ask(fitted.state, questions)
                # Validate inside the job so a bad answer stops the queue like any failure.
                return result, read_noul_answers(result.answers, list(questions))

            return ask

        for batch, (result, values) in zip(
            batches, await run_bounded([job(b) for b in batches], opts.max_concurrent_requests)
        ):
            stats.retries += result.retries
            stats.input_tokens += result.usage.input_tokens
            stats.output_tokens += result.usage.output_tokens
            for call in batch:
                answers[call.id] = (values[f"call_{call.id}"], values[f"result_{call.id}"])

    decisions = [decide_call(call, answers.get(call.id), opts.keep_threshold) for call in pairing.calls]
    decisions = [
        replace(d, chars_freed=_chars_freed(messages, call, d, opts.truncate_head_chars, archive))
        for call, d in zip(pairing.calls, decisions)
    ]
    out = apply_decisions(messages, decisions, pairing.calls, opts.truncate_head_chars, archive)

    stats.messages_after = len(out)
    stats.chars_after = sum(message_chars(m) for m in out)
    for decision in decisions:
        if decision.reason == "pinned":
            stats.pinned += 1
        elif decision.reason == "kept":
            stats.kept += 1
        elif decision.reason == "result_dropped":
            stats.results_dropped += 1
        else:
            stats.calls_dropped += 1
    stats.ms = (time.perf_counter() - started) * 1000
    return CompactResult(out, decisions, list(pairing.calls), stats)


def compact_sync(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions | None = None,
    archive: Mapping[str, str] | None = None,
) -> CompactResult:
    """:func:`compact` for callers without an event loop."""
    return asyncio.run(compact(messages, asker, options, archive))


def _chars_freed(
    messages: Sequence[SessionMessage],
    call: ToolCall,
    decision: CallDecision,
    head_chars: int,
    archive: Mapping[str, str] | None,
) -> int:
    """Characters of context this decision removes, counted as ``message_chars`` counts them."""
    if decision.action == "keep" or call.pinned:
        return 0
    result_text = next(
        r.text for r in messages[call.result_index].toolResults or () if r.tool_use_id == call.tool_use_id
    )
    if decision.action == "drop_call":
        return call.result_chars + input_chars(call.input)
    kept = truncated_result_text(
        result_text, call.is_error, head_chars, (archive or {}).get(call.tool_use_id)
    )
    return len(result_text) - len(kept)

