"""The Python side of the Claude Code hook: one JSON document in, one JSON document out.

Contract (docs/ARCHITECTURE.md, hook protocol): whatever happens the process answers one JSON
document on stdout and exits 0, and never writes to stderr. A failure becomes a ``fallback``
answer, so the engine runs its built-in summary and the session goes on; the failure itself goes
to ``<pluginData>/hook.log``.

Imports stay light: httpx is only imported when a Jev key is configured.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TextIO

from ..markers import LEAD_NOTE
from ..messages import MessageError, SessionMessage
from ..private_files import make_private_dirs, open_private_append, user_temp_dir
from ..redaction import redact_text
from ..textutil import escape_unwritable, js_json
from .archive import ARCHIVE_DIR, saved_or_unpointed
from .config import HookConfig, resolve_hook_config
from .deadline import Deadline, DeadlineError
from .event import HookEvent, parse_event
from .gate import after_pass, before_pass, window_of
from .meta import read_hung_texts, transcript_file
from .outcome import Answer, Outcome
from .stdin import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_BYTES, StdinError, StdinText
from .tally import Tally
from .turns import carried_by, keeps_handle, regroup, turn_problems

HOOK_LOG = "hook.log"
DECISIONS_DB = "decisions.sqlite"
# $.process.run caps stdout at 4 MiB; past this an answer refers to untouched messages by handle.
STDOUT_SOFT_LIMIT = 3 * 1024 * 1024
GOAL_LOG_CHARS = 300



# --------------------------------------------------------------------------- logging


def _usable_folder(candidate: str | None) -> bool:
    # Relative would mean "under whatever the cwd is": the user's project.
    if not candidate or not candidate.strip() or not os.path.isabs(candidate):
        return False
    try:
        os.fsencode(candidate)  # a NUL or an unencodable surrogate cannot name a file
    except (UnicodeError, ValueError):
        return False
    return "\x00" not in candidate


def data_dir(event_data: str | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The plugin data folder: the event's, then CLAUDE_PLUGIN_DATA; None when neither is usable."""
    env = os.environ if env is None else env
    for candidate in (event_data, env.get("CLAUDE_PLUGIN_DATA")):
        if _usable_folder(candidate):
            return Path(candidate)  # type: ignore[arg-type]
    return None


# hook.log is bounded: past this size it becomes hook.log.1 (the one before goes), so the log
# never holds more than twice this.
HOOK_LOG_MAX_BYTES = 4 * 1024 * 1024


def rotate_if_full(path: Path, limit: int = HOOK_LOG_MAX_BYTES) -> None:
    try:
        if path.stat().st_size >= limit:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass  # missing, or a race with another hook rotating it: appending is what matters


@dataclass
class HookLog:
    """Appends redacted lines to ``hook.log`` (0600) in the data folder, else in the per-user
    temp folder; a log that cannot be written anywhere is given up on, never raised."""

    directory: Path | None
    pid: int = field(default_factory=os.getpid)

    def write(self, level: str, message: str) -> None:
        try:
            stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
            text = escape_unwritable(redact_text(message)).replace("\r", " ")
            line = f"[{stamp}] pid={self.pid} {level} {text}".rstrip("\n") + "\n"
            data = line.encode("utf-8", errors="backslashreplace")
        except Exception:  # noqa: BLE001 - logging must never cost the answer
            return
        for folder in (self.directory, None):
            try:
                target = folder if folder is not None else user_temp_dir()
                make_private_dirs(target)
                rotate_if_full(target / HOOK_LOG)
                fd = open_private_append(target / HOOK_LOG)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                return
            except Exception:  # noqa: BLE001 - try the next folder, then give up quietly
                continue

    def info(self, message: str) -> None:
        self.write("INFO", message)

    def error(self, message: str, exc: BaseException | None = None) -> None:
        if exc is not None:
            import traceback  # only once something failed

            detail = "".join(traceback.format_exception(exc)).rstrip()
            message = f"{message}\n    " + detail.replace("\n", "\n    ")
        self.write("ERROR", message)


# --------------------------------------------------------------------------- answers


def fallback_answer(reason: str, log: Sequence[str] = ()) -> Answer:
    reason = redact_text(reason)  # it can quote an error body; the toast and the mod's log show it
    return {
        "action": "fallback",
        "reason": reason,
        "toast": f"fallback to built-in summary ({reason})",
        "log": list(log),
    }


def skip_answer(reason: str, log: Sequence[str] = ()) -> Answer:
    return {"action": "skip", "reason": reason, "log": list(log)}


def friendly_reason(exc: BaseException) -> str:
    """A short, actionable line for the toast; the traceback goes to hook.log."""
    from ..errors import CompactionError, explain  # local: only needed once something went wrong

    if isinstance(exc, DeadlineError):
        return str(exc)
    if isinstance(exc, EmptyInputError):
        return "the hook received no input"
    if isinstance(exc, StdinError):
        return f"the hook input could not be read: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return "the hook input is not UTF-8 text"
    if isinstance(exc, json.JSONDecodeError):
        return f"the hook input is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if isinstance(exc, MessageError):
        return f"the hook input is not a session.compact event ({exc.location}: {exc.what})"
    if isinstance(exc, CompactionError):
        return explain(exc, "plugin")[:300]
    text = str(exc).strip() or type(exc).__name__
    return f"internal error ({type(exc).__name__}: {text})"[:300]


class EmptyInputError(Exception):
    """Stdin closed or went quiet without a single byte."""

    fallback_reason = "bad-input"


# --------------------------------------------------------------------------- compaction


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


def build_asker(config: HookConfig, log: HookLog) -> tuple[Any, Callable[[], Any] | None, str]:
    """The judge and an async closer; JevClient (and httpx) only when a key is configured."""
    if config.use_jev():
        from ..jev.client import JevClient

        client = JevClient(
            provider=config.provider,
            api_key=config.api_key or None,
            base_url=config.base_url or None,
            model=config.model,
            timeout_s=config.jev_timeout_seconds,
        )
        if client.warning:
            log.info(f"jev: {client.warning}")
        return client, client.aclose, "jev"
    from ..judge.local import LocalJudge

    return LocalJudge(), None, "local"


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


def answer_cache(log: HookLog) -> Any:
    """The judge's remembered answers in the data folder; a broken file only costs the memory."""
    from ..answer_cache import open_answer_cache

    if log.directory is None:  # no data folder to remember answers in
        return None
    try:
        return open_answer_cache(log.directory)
    except Exception as exc:  # sqlite3.Error, OSError: compact without it
        log.info(f"answer cache unavailable: {exc}")
        return None



def _without_bulk(block: dict[str, Any]) -> dict[str, Any]:
    # ``result`` is the tool's stored record (the model reads ``text``); a rebuilt block can do
    # without it when the answer must shrink to fit the host's stdout cap.
    return {k: v for k, v in block.items() if k != "result"}


def wire_messages(out: Sequence[SessionMessage], *, compact: bool = False) -> list[dict[str, Any]]:
    """The replace answer's messages; ``compact`` refers to kept prompts by handle, drops bulk."""
    return list(_wired(out, compact))


def _wired(out: Sequence[SessionMessage], compact: bool) -> Iterator[dict[str, Any]]:
    for message in out:
        if keeps_handle(message):
            yield {"handle": message.handle} if compact else message.to_wire()
            continue
        data = message.to_wire()
        data.pop("handle", None)
        if compact:
            data["toolUses"] = [_without_bulk(b) for b in data.get("toolUses", [])]
            if "toolResults" in data:
                data["toolResults"] = [_without_bulk(b) for b in data["toolResults"]]
        yield data


def run_compaction(
    event: HookEvent, log: HookLog, tally: Tally | None = None, deadline: Deadline | None = None
) -> Outcome:
    from ..stats import decision_log_lines, summarize

    config = resolve_hook_config(event.options)
    for note in config.notes:
        log.info(note)
    deadline = deadline or Deadline(config.timeout_seconds)
    messages = list(event.messages)
    lines: list[str] = []
    if event.agentId:
        # Subagent transcripts are compacted too; the line says whose it was.
        lines.append(f"compacting subagent {event.agentId}")
    if not messages:
        return Outcome(skip_answer("nothing to compact", lines), "skipped", "nothing to compact")

    window = window_of(event.context)
    early = before_pass(window, event.trigger, config.target_percent)
    if early is not None:
        return Outcome(skip_answer(early.reason, lines), "skipped", early.reason)

    options = config.compact_options(messages, event.instructions)
    goal = options.goal
    preserve = in_flight_preserve(messages, options.preserve_recent_messages)
    if preserve != options.preserve_recent_messages:
        options = replace(options, preserve_recent_messages=preserve)
    asker, closer, judge = build_asker(config, log)
    if tally is not None:
        asker = tally.watch(asker)
    if log.directory is not None:  # without a data folder nothing is archived: markers say to re-run
        options = replace(options, archive_dir=str(log.directory / ARCHIVE_DIR))
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
    )
    if gate.verdict == "skip":
        return Outcome(skip_answer(gate.reason, lines), "skipped", f"{gate.reason}: {summary}", result, goal, judge)
    if gate.verdict == "fallback":
        reason = f"{gate.reason}: {summary}"
        return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, gate.category)

    out = regroup(result.messages, carried_by(messages, _hung_texts(event, messages, log)))
    if (result.stats.truncated or result.stats.dropped) and not any(m.text == LEAD_NOTE for m in out):
        # Once per history: a later pass finds it and adds none (the engine merges it into the
        # first user message of the request).
        out = [SessionMessage(role="user", text=LEAD_NOTE), *out]
    toast = toast_text(result.stats, gate.reason)
    answer: Answer = {"action": "replace", "messages": [], "toast": toast, "log": lines}
    # Sized one message at a time: a history too large to send is never built as one text.
    compact = _size(answer, _wired(out, False)) > STDOUT_SOFT_LIMIT
    if compact and (size := _size(answer, _wired(out, True))) > STDOUT_SOFT_LIMIT:
        reason = f"the pruned history is too large to hand back ({size // 1024} KiB): {summary}"
        return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, "budget")
    answer["messages"] = wire_messages(out, compact=compact)
    problems = turn_problems(answer["messages"], messages)
    if problems:
        log.error("tool results out of place: " + "; ".join(problems[:20]))
        reason = f"the pruned history would separate tool results from their calls ({problems[0]})"
        return Outcome(fallback_answer(reason, lines), "fallback", reason, result, goal, judge, "internal")
    return Outcome(answer, "replaced", summary, result, goal, judge)


def answer_text(answer: Answer) -> str:
    """The answer as one line of JSON that encodes as strict UTF-8 (lone surrogates escaped)."""
    return js_json(answer)


def toast_text(stats: Any, how: str) -> str:
    """``12 of 40 tool outputs moved to the archive (9 cut to digests, 3 dropped), context 61% → 23%, no summary``."""
    unpinned = stats.calls - stats.pinned
    cut = stats.truncated + stats.dropped
    parts = [f"{stats.truncated} cut to digests"] if stats.truncated else []
    if stats.dropped:
        parts.append(f"{stats.dropped} dropped")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"{cut} of {unpinned} tool outputs moved to the archive{detail}, {how}, no summary"


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


def _size(answer: Answer, messages: Iterable[dict[str, Any]]) -> int:
    """Bytes of ``answer_text`` of the answer with these messages, serialised one at a time."""
    total = len(answer_text({**answer, "messages": []}).encode("utf-8"))
    for count, message in enumerate(messages):
        total += len(js_json(message).encode("utf-8")) + (1 if count else 0)  # the comma between two
    return total


# --------------------------------------------------------------------------- decision log


def record_decisions(event: HookEvent | None, outcome: Outcome, directory: Path | None, log: HookLog) -> None:
    """One row per compaction and one per decided call; a failing log never changes the answer."""
    if directory is None:
        log.error("decision log not written (no usable plugin data folder)")
        return
    try:
        from .record import record_outcome

        make_private_dirs(directory)
        # Created 0600 before SQLite opens it: its -wal and -shm files copy the database's mode.
        os.close(os.open(directory / DECISIONS_DB, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        written = record_outcome(directory / DECISIONS_DB, event, outcome)
        if isinstance(written, Path):
            log.info(f"decision log busy past its budget; row kept in {written.name} for the next write")
    except Exception as exc:  # a locked or broken database must not cost the compaction
        log.error(f"decision log not written ({type(exc).__name__}: {exc})")


# --------------------------------------------------------------------------- main


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


class AnswerGuard:
    """Exactly one record and one answer leave the process, and in time.

    The main path ``claim``s the right to write the decision-log row, then ``send``s its answer.
    ``watch`` arms a last resort for work that never yields to the compaction deadline (a
    CPU-bound stage on a huge input): at ``deadline.last_resort_at`` it claims instead, logs,
    writes a fallback row (waiting for it until ``answer_at`` at most), answers a fallback and
    ends the process, before the mod kills it.
    """

    def __init__(self, out: TextIO, deadline: Deadline) -> None:
        self.deadline = deadline
        self.event: HookEvent | None = None
        # The main path's answer, known once the compaction is done and before its row is written.
        self.pending: Answer | None = None
        self._out = out
        self._claim_lock = threading.Lock()
        self._claimed = False
        self._send_lock = threading.Lock()
        self._sent = False

    def claim(self) -> bool:
        with self._claim_lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def send(self, answer: Answer) -> bool:
        text = answer_text(answer) + "\n"
        with self._send_lock:  # held while writing, so a losing sender waits for a whole answer
            if self._sent:
                return False
            self._sent = True
            self._out.write(text)
            self._out.flush()
            return True

    def watch(self, log_holder: list[HookLog]) -> None:
        # Imported now, not when the deadline strikes: then the main thread competes for the GIL.
        from . import record  # noqa: F401

        def last_resort() -> None:
            while (left := self.deadline.last_resort_at - time.monotonic()) > 0:
                time.sleep(min(left, 0.05))
            if not self.claim():
                # The main path is recording and answering; if the row outlasts the answer's
                # deadline (a long-locked database), the answer still goes out in time.
                while (left := self.deadline.answer_at - time.monotonic()) > 0:
                    if self._sent:
                        return
                    time.sleep(min(left, 0.05))
                if not self._sent:
                    log_holder[0].error("answering before the decision log row is written: out of time")
                    try:
                        self.send(self.pending or fallback_answer(str(self.deadline.error())))
                    finally:
                        os._exit(0)
                return
            log = log_holder[0]
            reason = str(self.deadline.error())
            log.error(f"fallback: {reason}; the compaction was still running")
            outcome = Outcome(fallback_answer(reason), "fallback", reason, category="deadline")
            # In this thread: handing the row to another one would give the stuck work more
            # chances to take the GIL back (a long C call does not let go of it).
            record_decisions(self.event, outcome, log.directory, log)
            try:
                self.send(outcome.answer)
            finally:
                os._exit(0)

        threading.Thread(target=last_resort, name="fast-jev-deadline", daemon=True).start()


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
            threading.Event().wait()  # the last resort is recording and answering; it ends the process
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
