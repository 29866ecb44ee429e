"""The Python side of the Claude Code hook: one JSON document in, one JSON document out.

Contract (docs/ARCHITECTURE.md, hook protocol): whatever happens the process answers one JSON
document on stdout and exits 0, and never writes to stderr. A failure becomes a ``fallback``
answer, so the engine runs its built-in summary and the session goes on; the failure itself goes
to ``<pluginData>/hook.log``. The work is in the package's other modules; this one reads
stdin, hands the event to ``compaction.run_compaction`` and answers through ``guard.AnswerGuard``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence, TextIO

from ..redaction import redact_text
from .answer import fallback_answer
from .compaction import run_compaction
from .config import HookConfig, resolve_hook_config
from .deadline import Deadline
from .event import HookEvent, parse_event
from .failure import EmptyInputError, friendly_reason
from .folder import data_dir
from .guard import AnswerGuard
from .log import HookLog
from .outcome import Answer, Outcome
from .record import record_decisions
from .stdin import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_BYTES, StdinText
from .tally import Tally

GOAL_LOG_CHARS = 300


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def handle(
    raw_reader: Callable[[], StdinText],
    env: Mapping[str, str],
    log_holder: list[HookLog],
    started: float | None = None,
    guard: AnswerGuard | None = None,
) -> tuple[Answer, HookEvent | None, Outcome]:
    """Parse, compact, decide. Raises nothing: every failure is a fallback answer."""
    event: HookEvent | None = None
    started = time.monotonic() if started is None else started
    tally = Tally()
    try:
        source = raw_reader()
        if source.blank():
            raise EmptyInputError()
        deadlines: list[Deadline] = []

        def header(fields: dict[str, Any]) -> None:
            # The deadline and the data folder are known before the messages, the slow part of
            # reading a large event, so a last resort during it still logs and records.
            plugin_data = fields.get("pluginData")
            log_holder[0] = HookLog(data_dir(plugin_data if isinstance(plugin_data, str) else None, env))
            options = fields.get("options")
            deadlines.append(Deadline(resolve_hook_config(options if isinstance(options, dict) else None).timeout_seconds, started))
            if guard is not None:
                guard.deadline = deadlines[0]

        # Decoded as it is read: the event's text is never alive whole, nor beside its messages.
        event = parse_event(source, header)
        if guard is not None:
            guard.event = event
        outcome = run_compaction(event, log_holder[0], tally, deadlines[0] if deadlines else None)
    except Exception as exc:
        from .category import fallback_category

        reason = friendly_reason(exc)
        log_holder[0].error(f"fallback: {reason}", exc)
        outcome = Outcome(fallback_answer(reason), "fallback", reason, category=fallback_category(exc))
    log = log_holder[0]
    ms = round((time.monotonic() - started) * 1000)
    outcome.tally, outcome.ms = tally, ms
    who = f" agent={event.agentId}" if event and event.agentId else ""
    trigger = event.trigger if event else "?"
    session = event.sessionId if event and event.sessionId else "?"
    log.info(f"{outcome.action} session={session} trigger={trigger}{who} in {ms} ms: {outcome.reason}")
    if outcome.goal:
        goal_line = outcome.goal.replace("\n", " | ")
        # Redacted before the cut: a secret cut in half would escape the patterns.
        log.info(f"goal: {redact_text(goal_line)[:GOAL_LOG_CHARS]}")
    return outcome.answer, event, outcome


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin_fd: int = 0,
    stdout: TextIO | None = None,
    started: float | None = None,
) -> int:
    """Read stdin, answer on stdout, exit 0. ``argv`` is accepted for symmetry and ignored.

    Run as the hook process (``stdout`` left to default), a watchdog also guarantees the answer
    before the default ``timeoutSeconds``, or the event's own once it is read. ``started`` is
    when the process began (``time.monotonic()``), so the imports count against the deadline.
    """
    started = time.monotonic() if started is None else started
    env = os.environ
    if stdout is None:
        try:  # never the locale's codec: the answer is UTF-8 JSON whatever LANG says
            sys.stdout.reconfigure(encoding="utf-8", errors="strict")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    out = stdout if stdout is not None else sys.stdout
    log_holder = [HookLog(data_dir(None, env))]
    guard = AnswerGuard(out, Deadline(HookConfig.timeout_seconds, started))
    if stdout is None:
        guard.watch(log_holder)
    answer: Answer = fallback_answer("internal error")
    try:
        idle = _env_float(env, "FAST_JEV_STDIN_IDLE_SECONDS", DEFAULT_IDLE_SECONDS)
        cap = int(_env_float(env, "FAST_JEV_STDIN_MAX_BYTES", DEFAULT_MAX_BYTES))
        reader = lambda: StdinText(stdin_fd, idle_seconds=idle, max_bytes=cap)  # noqa: E731
        answer, event, outcome = handle(reader, env, log_holder, started, guard)
        if not guard.claim():
            # The last resort is recording and answering; it ends the process. Until then, wait on
            # a lock that is never released.
            never = threading.Lock()
            never.acquire()
            never.acquire()
        guard.pending = answer
        record_decisions(event, outcome, log_holder[0].directory, log_holder[0])
    except BaseException as exc:  # noqa: BLE001 - the last line of defence: still answer
        log_holder[0].error("hook failed outside the compaction", exc)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            answer = fallback_answer("interrupted")
    for candidate in (answer, fallback_answer("internal error (the answer could not be written)")):
        try:
            guard.send(candidate)
            break
        except OSError as exc:  # stdout gone (the host gave up): nothing left to tell it
            log_holder[0].error("could not write the answer", exc)
            break
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be serialised: send the fallback
            log_holder[0].error("could not serialise the answer", exc)
    return 0
