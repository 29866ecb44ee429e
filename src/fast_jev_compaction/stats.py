"""Counts and the one-line texts shown to users (upstream §7.4-7.5); sizes are ``conversation.sizes``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .decide.decisions import BUDGET, PINNED, THRESHOLD, CallDecision

UI_LOG_MAX_CHARS = 4096
_CHUNK_PREFIX_ROOM = 24


@dataclass
class CompactStats:
    messages_before: int = 0
    messages_after: int = 0
    chars_before: int = 0
    chars_after: int = 0
    calls: int = 0
    kept: int = 0
    truncated: int = 0
    dropped: int = 0
    pinned: int = 0
    # Calls a deterministic rule settled (kept or cut) without asking the judge.
    settled_by_rules: int = 0
    # With a window (``CompactOptions.window_tokens``): the characters the pass had to free to
    # bring the context under its target (``policy.chars_to_free``), and how many of them it
    # could not free (0: the target is reached). None and 0 without a window.
    need_chars: int | None = None
    short_chars: int = 0
    # Calls whose long input fields (a written file's body, a heredoc, a Task prompt) the pass
    # moved to the archive, the ladder's rung b, taken only when cutting outputs fell short.
    inputs_archived: int = 0
    # Images and documents attached to messages older than the pinned window that the pass moved
    # to the archive (rung c, after rung b fell short). The messages' characters leave them out:
    # each counts towards the need at ``policy.MEDIA_CHARS``, as it counted in it.
    media_archived: int = 0
    state_tokens: int = 0
    state_stage: str = ""
    requests: int = 0
    # Judged calls whose answer came from the answer cache (an earlier pass) instead of a request.
    remembered: int = 0
    # Windowed states (windows.py): how many distinct states the requests carried; 0 for one state.
    windows: int = 0
    # The requests' estimated size on the wire: overhead, state and questions, summed.
    estimated_tokens: int = 0
    retries: int = 0
    failed_batches: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    ms: float = 0.0
    # Old turns moved whole to the archive to fit a window (turn_eviction.py, rung d)...
    evicted_turns: int = 0
    # ... and older parts of a turn: the one rung d's need ends in, the turn in flight's (rung e).
    evicted_parts: int = 0
    # Old prompts cut to their opening, each saved whole (rung e, turn_eviction.shorten_old_prompts).
    prompts_archived: int = 0
    # Earlier prompts moved out with the conversation before the turn in flight, one file and one
    # note (rung e, last: turn_eviction.fold_old_turns).
    prompts_folded: int = 0
    # The last prompt, a command's output rather than the user's words, cut to its digest (last of
    # all: turn_eviction.cut_command_output).
    command_output_cut: bool = False

    @property
    def reduction_ratio(self) -> float:
        if self.chars_before == 0:
            return 0.0
        return (self.chars_before - self.chars_after) / self.chars_before


def percent(ratio: float) -> str:
    """One decimal; anything short of everything stays below 100 % (99.96 % shows 99.9 %)."""
    tenths = math.floor(ratio * 1000 + 0.5)
    if tenths >= 1000 and ratio < 1:
        tenths = 999
    return f"{tenths / 10:.1f}%"


def summarize(stats: CompactStats) -> str:
    """``87.3% reduction; 3 kept, 5 truncated, 2 dropped, 4 pinned (6 by rules); state ~N tokens (stage) in K request(s)``.

    Given a window, the counts are followed by the inputs archived and how the pass stands
    against the window's target (``window's target reached (N chars needed)``).

    Without a request (the embedded judge, or nothing to ask) the tail is ``no judge requests``.
    """
    parts = [
        f"{count} {label}"
        for count, label in (
            (stats.kept, "kept"),
            (stats.truncated, "truncated"),
            (stats.dropped, "dropped"),
            (stats.pinned, "pinned"),
        )
        if count
    ]
    if parts and stats.settled_by_rules:
        parts[-1] += f" ({stats.settled_by_rules} by rules)"
    tail = f"in {stats.requests} request(s)"
    if stats.windows:
        tail += f" over {stats.windows} windows"
    if stats.remembered:
        tail += f", {stats.remembered} answer(s) remembered"
    if stats.retries:
        tail += f", {stats.retries} retried"
    if stats.failed_batches:
        tail += f", {stats.failed_batches} batch(es) failed and kept whole"
    if stats.input_tokens or stats.output_tokens:
        tail += f", judge read {stats.input_tokens} and wrote {stats.output_tokens} tokens"
    head = f"{percent(stats.reduction_ratio)} reduction; {', '.join(parts) or 'no tool calls'}"
    # What the ladder's lower rungs moved (ladder.py), each said only when it happened.
    for count, said in (
        (stats.inputs_archived, ", {} input(s) archived"),
        (stats.media_archived, ", {} image(s) or document(s) archived"),
        (stats.evicted_turns, "; {} old turn(s) moved to the archive"),
        (stats.evicted_parts, "; {} older part(s) of a turn moved to the archive"),
        (stats.prompts_archived, "; {} old prompt(s) cut to their opening, each saved whole"),
        (stats.prompts_folded, "; the conversation before the turn in flight ({} prompt(s)) moved to one file"),
        (stats.command_output_cut, "; the command output that ends it cut to a digest, saved whole"),
    ):
        if count:
            head += said.format(count)
    if stats.need_chars is not None:
        head += f"; {_window_text(stats)}"
    if not stats.requests and not stats.retries:
        # The embedded judge reads the messages in process, and rules or pins may settle all.
        return f"{head}; no judge requests"
    return f"{head}; state ~{stats.state_tokens} tokens ({stats.state_stage}) {tail}"


def _window_text(stats: CompactStats) -> str:
    """How the pass stands against its window's target (a pass given a window only)."""
    if not stats.need_chars:
        return "already under the window's target"
    if stats.short_chars:
        return f"{stats.short_chars:,} of {stats.need_chars:,} chars short of the window's target"
    return f"window's target reached ({stats.need_chars:,} chars needed)"


def _fixed2(value: float) -> str:
    # JavaScript's toFixed(2) rounds half away from zero on the exact binary value: worked out
    # on the value's exact fraction (the decimal module costs the hook's start 3 ms to import).
    numerator, denominator = value.as_integer_ratio()
    hundredths, rest = divmod(100 * abs(numerator), denominator)
    hundredths += 2 * rest >= denominator
    sign = "-" if numerator < 0 or (numerator == 0 and str(value).startswith("-")) else ""
    return f"{sign}{hundredths // 100}.{hundredths % 100:02d}"


def decision_entry(decision: CallDecision) -> str:
    """``t1:Read:drop/superseded-reread`` for a rule, ``t2:Bash:keep/call=0.90/result=0.90`` for a judge."""
    head = f"{decision.id}:{decision.tool}:{decision.action}"
    if decision.reason not in (THRESHOLD, BUDGET):
        return f"{head}/{decision.reason}"
    return f"{head}/call={_fixed2(decision.keep_call)}/result={_fixed2(decision.keep_result)}"


def decision_log_lines(decisions: Sequence[CallDecision], max_chars: int = UI_LOG_MAX_CHARS) -> list[str]:
    """Non-pinned decisions packed into log lines of at most ``max_chars``."""
    entries = [decision_entry(d) for d in decisions if d.reason != PINNED]
    if not entries:
        return ["decisions: (none)"]
    room = max_chars - _CHUNK_PREFIX_ROOM
    chunks: list[str] = []
    for entry in entries:
        if chunks and len(chunks[-1]) + 1 + len(entry) <= room:
            chunks[-1] += " " + entry
        else:
            chunks.append(entry)
    if len(chunks) == 1:
        return [f"decisions: {chunks[0]}"]
    return [f"decisions ({k}/{len(chunks)}): {chunk}" for k, chunk in enumerate(chunks, 1)]
