"""Exactly one decision-log row and one answer leave the hook process, and in time.

The record is imported with the guard, not when the deadline strikes: by then the main thread
competes for the GIL.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TextIO

from ..conversation.stored import piece_text
from .answer import answer_pieces, fallback_answer
from .deadline import Deadline
from .event import HookEvent
from .log import HookLog
from .outcome import Answer, Outcome
from .record import record_decisions


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
        # Made before the lock, so an answer that cannot be encoded leaves nothing half written.
        pieces = list(answer_pieces(answer))
        with self._send_lock:  # held while writing, so a losing sender waits for a whole answer
            if self._sent:
                return False
            self._sent = True
            for piece in pieces:
                self._out.write(piece_text(piece))
            self._out.write("\n")
            self._out.flush()
            return True

    def watch(self, log_holder: list[HookLog]) -> None:
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

        # A daemon: it never holds the process open (the main path ends it with os._exit).
        threading.Thread(target=last_resort, name="last-resort", daemon=True).start()
