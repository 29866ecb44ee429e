"""Session replay: each session fed message by message into a live context that is compacted
where the plugin and the engine would compact it, against a window smaller than the session.

The fire points (:mod:`.quality`) compact a prefix once; a long session is compacted again and
again, each pass over the output of the last, and what a later turn needs is looked for at the
moment it needs it. Per session and window:

- the live context is measured as the compaction measures it (``sizes.message_chars`` over
  ``policy.CHARS_PER_TOKEN``), plus ``overhead_tokens`` for the system prompt and tools (0 by
  default: at a 32k window Claude Code's own ~15-20k would leave no pass a reachable target, so
  the small windows stand for a large window over a long session, messages only);
- the plugin's trigger (hooks/mod.mjs): at the end of a turn (an assistant message, no call
  pending, the next message a prompt or none) once the context reaches ``compactAtPercent``, once
  per upward crossing; above it again only after ``REARM_POINTS`` more, or once a compaction the
  trigger did not start changed the history. The engine's: at any message once the context
  reaches ``ENGINE_PERCENT`` of the window (its threshold, with the model's window the same size);
- a pass runs :func:`compact_pass` with the window, the plugin's target and the embedded judge,
  and ``hook/gate.py``'s ``after_pass`` decides, as in the hook: *replace* (the live context
  becomes the pass's output), *skip* (nothing freed at the plugin's trigger) or *fallback*, the
  built-in summary. A pass that raises is a *failure*, and the hook falls back for it too;
- after a built-in summary the live context restarts from :func:`summary_stub`: a user message
  of ``SUMMARY_TOKENS`` holding the last prompt, then the exchange in flight, if any;
- a *reuse* is a message repeating one of an earlier output's distinctive snippets
  (:mod:`.labels`' definition), counted once per output and message, when a compaction changed
  the history since the output arrived. Just before that message joins the live context, the
  output is *in context* when its text is there whole or every snippet the message repeats is
  there (a digest, a quote, a re-read); else *gone*, and *unrecoverable* unless a marker in the
  live context leads to an archived file holding it whole: the file it names, or one the markers
  in that file name (``outcome.read_archived``: an evicted turn's file keeps its digests' markers);
- a replacing pass is *over target* when it leaves the context over the target, and of those
  *unreachable* when the last prompt and the turn in flight alone are over it (what the ladder
  keeps of them: the user's last prompt and the turn's last exchange, which it may not take).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from ..compaction import CompactResult, run_sync
from ..conversation.messages import SessionMessage
from ..conversation.sizes import message_chars
from ..decide.policy import CHARS_PER_TOKEN
from ..decide.turn_eviction import in_flight_chars, in_flight_preserve
from ..hook.gate import EngineLimit, Window, after_pass
from ..judge.local import LocalJudge
from ..judge.reuse import channel_texts, snippets
from ..ladder import compact_to_fit
from ..options import OPTION, CompactOptions
from ..state.answer_cache import AnswerCache, MemoryAnswerCache
from ..state.asker import JevAsker
from .back_to_back import project_runs
from .corpus import Session
from .foresight import ForesightContext
from .labels import OutputLabel, label_outputs
from .outcome import Context, read_archived

REPLAY_WINDOWS = (32_000, 64_000, 200_000)
COMPACT_AT_PERCENT: float = OPTION["compact_at_percent"].default
TARGET_PERCENT: float = OPTION["target_percent"].default
MIN_FREED_PERCENT: float = OPTION["min_freed_percent"].default
# hooks/mod.mjs REARM_POINTS: above compactAtPercent the trigger fires again only this much higher.
REARM_POINTS = 10.0
# Claude Code's auto-compaction fires near a full window; its threshold is the window less a buffer.
ENGINE_PERCENT = 95.0
# What the built-in summary leaves: Claude Code's summaries run to a few thousand tokens.
SUMMARY_TOKENS = 2_000
SUMMARY_NOTE = "[replay: the built-in summary of the conversation so far stands here]"
# Where the markers of a replay say the cut outputs are; the archive is a dict, never written
# (each pass is handed it, as the hook's finds its files on disk).
ARCHIVE_DIR = "/replay-archive"


async def compaction_pass(
    messages: Sequence[SessionMessage],
    asker: JevAsker,
    options: CompactOptions,
    cache: AnswerCache | None = None,
    archive: Mapping[str, str] | None = None,
) -> CompactResult:
    """The one call into the compaction, for either judge: the eviction ladder, as the hook and
    the CLI run it. ``archive``: the files earlier passes saved (kept in memory here, where the
    hook has them on disk), so a pass knows their marks as its own."""
    return await compact_to_fit(messages, asker, options, cache, archive)


def compact_pass(
    messages: Sequence[SessionMessage], options: CompactOptions, archive: Mapping[str, str] | None = None
) -> CompactResult:
    """What the plugin runs at a trigger with the embedded judge, which answers at once (no
    event loop, as ``compact_sync``)."""
    return run_sync(compaction_pass(messages, LocalJudge(), options, archive=archive), waits=False)


# A pass over the live messages, given the files earlier passes saved.
Compactor = Callable[[Sequence[SessionMessage], CompactOptions, Mapping[str, str]], CompactResult]
# The estimated tokens a remote judge is sent for one pass over the messages given.
Meter = Callable[[Sequence[SessionMessage], CompactOptions], int]


def served_meter(url: str) -> Meter:
    """A meter for one session: each pass compacted again through the Jev endpoint ``url``,
    with the session's answers remembered across its passes as the hook remembers them; only
    the tokens are kept (the embedded judge's pass goes on shaping the context)."""
    from ..jev.client import JevClient

    cache = MemoryAnswerCache()

    def tokens(messages: Sequence[SessionMessage], options: CompactOptions) -> int:
        async def run() -> CompactResult:
            async with JevClient(base_url=url) as client:
                return await compaction_pass(messages, client, options, cache)

        return run_sync(run()).stats.estimated_tokens

    return tokens


@dataclass
class Tally:
    """One session's replay at one window, or a sum of them."""

    sessions: int = 0
    passes: int = 0  # compactions run, at either trigger
    replaced: int = 0
    skipped: int = 0  # the plugin's pass freed nothing: the context stays as it was
    summaries: int = 0  # passes the gate handed to the built-in summary
    failures: list[str] = field(default_factory=list)  # what each pass that raised said (the hook then runs the summary too)
    reuses: int = 0  # reuses after a compaction, once per output and reusing message
    gone: int = 0
    unrecoverable: int = 0
    summarized: int = 0  # ... of which a built-in summary (or a failure) took out of the context
    over_target: int = 0  # replacing passes that leave the context over the target
    unreachable: int = 0  # ... of which the last prompt and the turn in flight alone are over it
    # The same session replayed with foresight (foresight.py): its reuses, at its own passes, and those gone.
    foresight_reuses: int = 0
    foresight_gone: int = 0
    after: list[float] = field(default_factory=list)  # the context after each replacing pass, % of the window
    judge_tokens: list[int] = field(default_factory=list)  # per pass that ran, with a meter

    def add(self, other: "Tally") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class _Live:
    """The live context, with what a reuse check needs of it built as messages join it."""

    def __init__(self, overhead_tokens: int) -> None:
        self.overhead_tokens = overhead_tokens
        self.messages: list[SessionMessage] = []
        self.chars = 0
        self._context = Context({}, set(), [], 0)
        self._indexed = 0

    def append(self, message: SessionMessage) -> None:
        self.messages.append(message)
        self.chars += message_chars(message)

    def reset(self, messages: Iterable[SessionMessage]) -> None:
        self.messages = list(messages)
        self.chars = sum(map(message_chars, self.messages))
        self._context = Context({}, set(), [], 0)
        self._indexed = 0

    def tokens(self) -> float:
        return self.chars / CHARS_PER_TOKEN + self.overhead_tokens

    def context(self) -> Context:
        """What the live context holds (outcome.Context), indexed up to its last message."""
        if self._indexed < len(self.messages):
            more = Context.of(self.messages[self._indexed :])
            self._context.results.update(more.results)
            self._context.snippets |= more.snippets
            self._context.marker_paths.extend(more.marker_paths)
            self._indexed = len(self.messages)
        return self._context


def reuse_events(messages: Sequence[SessionMessage], labels: Mapping[str, OutputLabel]) -> dict[int, dict[str, set[str]]]:
    """Message index -> the outputs it reuses (tool_use_id -> the snippets it repeats)."""
    wanted: dict[str, list[str]] = {}
    for label in labels.values():
        for snippet in label.reuses:
            wanted.setdefault(snippet, []).append(label.tool_use_id)
    events: dict[int, dict[str, set[str]]] = {}
    if not wanted:
        return events
    for position, message in enumerate(messages):
        found: set[str] = set()
        for text in channel_texts(message):
            found |= snippets(text)
        for snippet in found & wanted.keys():
            for tool_use_id in wanted[snippet]:
                if position > labels[tool_use_id].result_index:
                    events.setdefault(position, {}).setdefault(tool_use_id, set()).add(snippet)
    return events


def is_turn_end(messages: Sequence[SessionMessage], index: int, pending: set[str]) -> bool:
    """Whether message ``index`` closes a turn: the assistant's, no call pending, and what
    follows (if anything) a prompt rather than more of the same turn."""
    if messages[index].role != "assistant" or pending:
        return False
    after = messages[index + 1] if index + 1 < len(messages) else None
    return after is None or (after.role == "user" and not after.toolResults)


def summary_stub(session: Sequence[SessionMessage], upto: int, live: Sequence[SessionMessage], pending: set[str]) -> list[SessionMessage]:
    """What the built-in summary leaves after message ``upto``: one user message of
    ``SUMMARY_TOKENS`` (the note, the last prompt so far, padding that carries no snippet), then
    the live messages from the first call still pending, which the turn goes on with."""
    prompt = next(
        (m.text for m in reversed(session[: upto + 1]) if m.role == "user" and m.text and not m.toolResults), ""
    )
    text = f"{SUMMARY_NOTE}\n\n{prompt}"
    text += "\n" + "." * max(0, int(SUMMARY_TOKENS * CHARS_PER_TOKEN) - len(text) - 1)
    stub = [SessionMessage(role="user", text=text)]
    start = next((n for n, m in enumerate(live) if any(u.tool_use_id in pending for u in m.toolUses)), len(live))
    return stub + list(live[start:])


def replay_session(
    messages: Sequence[SessionMessage],
    window: int,
    *,
    overhead_tokens: int = 0,
    compactor: Compactor = compact_pass,
    meter: Meter | None = None,
) -> Tally:
    """Replay one session against a window of ``window`` tokens (see the module's description)."""
    labels = label_outputs(messages)
    events = reuse_events(messages, labels)
    originals = {r.tool_use_id: r.text for m in messages for r in m.toolResults or ()}
    tally = Tally(sessions=1)
    live = _Live(overhead_tokens)
    archive: dict[str, str] = {}
    pending: set[str] = set()
    trigger = _Trigger()
    # The messages before which, last, a compaction changed the history, and a summary took its place.
    since = _Since()
    foresight = ForesightContext(labels, window, TARGET_PERCENT, overhead_tokens)
    foresight_trigger = _Trigger()
    foresight_changed = -1

    def percent() -> float:
        return 100.0 * live.tokens() / window

    def compact(trigger: str, index: int) -> bool:
        """One pass at ``trigger``; whether it changed the history."""
        tally.passes += 1
        tokens = round(live.tokens())
        options = CompactOptions(
            archive_dir=ARCHIVE_DIR, window_tokens=window, target_percent=TARGET_PERCENT, context_tokens=tokens,
            preserve_recent_messages=in_flight_preserve(live.messages, CompactOptions().preserve_recent_messages),
        )
        try:
            result = compactor(live.messages, options, archive)
        except Exception as exc:  # the hook answers any failure with the built-in summary
            tally.failures.append(f"{type(exc).__name__}: {exc}")
            live.reset(summary_stub(messages, index, live.messages, pending))
            since.summary = index + 1
            return True
        if meter is not None:
            tally.judge_tokens.append(meter(live.messages, options))
        size = Window(tokens, window)
        engine = EngineLimit(size, round(window * ENGINE_PERCENT / 100), window) if trigger == "auto" else None
        gate = after_pass(result.stats, size, trigger, target_percent=TARGET_PERCENT,
                          min_freed_percent=MIN_FREED_PERCENT, min_reduction_ratio=0.0, engine=engine)
        if gate.verdict == "skip":
            tally.skipped += 1
            return False
        if gate.verdict == "fallback":
            tally.summaries += 1
            live.reset(summary_stub(messages, index, live.messages, pending))
            since.summary = index + 1
            return True
        tally.replaced += 1
        archive.update(result.archive)
        live.reset(result.messages)
        tally.after.append(percent())
        if percent() > TARGET_PERCENT:
            tally.over_target += 1
            in_flight = in_flight_chars(live.messages) / CHARS_PER_TOKEN + live.overhead_tokens
            tally.unreachable += 1 if 100.0 * in_flight / window > TARGET_PERCENT else 0
        return True

    for index, message in enumerate(messages):
        for tool_use_id, repeated in events.get(index, {}).items():
            arrived = labels[tool_use_id].result_index
            if arrived < since.change:
                _check(tally, live.context(), tool_use_id, originals[tool_use_id], repeated, archive, arrived < since.summary)
            if arrived < foresight_changed:
                tally.foresight_reuses += 1
                tally.foresight_gone += foresight.gone(tool_use_id, repeated)
        live.append(message)
        foresight.append(message)
        pending.update(u.tool_use_id for u in message.toolUses)
        pending.difference_update(r.tool_use_id for r in message.toolResults or ())
        turn_end = is_turn_end(messages, index, pending)
        if trigger.passes(index, turn_end, percent, compact):
            since.change = index + 1
        # Foresight at its own passes.
        if foresight_trigger.passes(index, turn_end, foresight.percent, lambda _name, at: foresight.compact(at)):
            foresight_changed = index + 1
    return tally


@dataclass
class _Trigger:
    """The plugin's trigger (hooks/mod.mjs): at a turn's end, once per upward crossing of
    ``COMPACT_AT_PERCENT``, again ``REARM_POINTS`` higher or once a compaction it did not start
    (``others``: the engine's) changed the history."""

    fired_at: float | None = None
    others: bool = False

    def plugin(self, percent: float) -> bool:
        """At a turn's end with the context at ``percent``: whether the trigger fires."""
        if self.others or percent < COMPACT_AT_PERCENT:
            self.fired_at = None
        self.others = False
        if percent >= COMPACT_AT_PERCENT and (self.fired_at is None or percent >= self.fired_at + REARM_POINTS):
            self.fired_at = percent
            return True
        return False

    def passes(self, index: int, turn_end: bool, percent: Callable[[], float], run: Callable[[str, int], bool]) -> bool:
        """After message ``index``: the plugin's pass at a turn's end when it fires, then the
        engine's (``ENGINE_PERCENT``, at any message); ``run(trigger, index)`` runs one and says
        whether it changed the history, as this does of both."""
        changed = turn_end and self.plugin(percent()) and run("plugin", index)
        if percent() >= ENGINE_PERCENT and run("auto", index):
            self.others = True
            changed = True
        return changed


@dataclass
class _Since:
    change: int = -1
    summary: int = -1


def _check(
    tally: Tally, context: Context, tool_use_id: str, original: str, repeated: set[str], archive: Mapping[str, str],
    summarized: bool,
) -> None:
    """One reuse, against the live context just before the message making it (``summarized``:
    a built-in summary has replaced a context holding the output since it arrived)."""
    tally.reuses += 1
    if context.results.get(tool_use_id) == original or repeated <= context.snippets:
        return
    tally.gone += 1
    if not any(original in text for text in read_archived(context.marker_paths, archive)):
        tally.unrecoverable += 1
        tally.summarized += 1 if summarized else 0


@dataclass
class Replay:
    """The replay of a set of sessions: window -> source -> totals."""

    overhead_tokens: int = 0
    judge_url: str = ""  # the Jev endpoint each pass's judge tokens were metered through; "": none
    by_window: dict[int, dict[str, Tally]] = field(default_factory=dict)
    # Each project's sessions back to back as one (back_to_back.py), apart: window -> source -> totals.
    runs: dict[int, dict[str, Tally]] = field(default_factory=dict)

    def total(self, window: int, *, runs: bool = False) -> Tally:
        """The sessions' totals at ``window``; with ``runs``, the projects' runs'."""
        whole = Tally()
        for tally in (self.runs if runs else self.by_window).get(window, {}).values():
            whole.add(tally)
        return whole


def replay(
    sessions: Sequence[Session],
    windows: Sequence[int] = REPLAY_WINDOWS,
    *,
    overhead_tokens: int = 0,
    compactor: Compactor = compact_pass,
    judge_url: str = "",
    progress: Callable[[str], None] | None = None,
) -> Replay:
    """Every session replayed at every window, summed per source, and each project's sessions
    back to back as one (``back_to_back.project_runs``), summed apart; with ``judge_url``, the
    tokens a remote judge behind it would be sent at each pass (:func:`served_meter`)."""
    report = Replay(overhead_tokens=overhead_tokens, judge_url=judge_url)
    runs = project_runs(sessions)
    for window in windows:
        for kind, played, totals in (("session", sessions, report.by_window), ("project run", runs, report.runs)):
            per_source = totals.setdefault(window, {})
            for number, session in enumerate(played):
                if progress is not None:
                    progress(f"replay: window {window:,}, {kind} {number + 1}/{len(played)}")
                meter = served_meter(judge_url) if judge_url else None
                tally = replay_session(session.messages, window, overhead_tokens=overhead_tokens, compactor=compactor,
                                       meter=meter)
                per_source.setdefault(session.source, Tally()).add(tally)
    return report
