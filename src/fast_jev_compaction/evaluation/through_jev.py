"""The evaluation through the Jev protocol: the same compactions, their judge asked over HTTP.

In process the judge reads the messages; behind a Jev endpoint (``fast-jev serve``) it reads the
states the compaction sends, which carry notes, inputs and digests instead of whole outputs
(``judge/state_features.py``). Each fire point is compacted twice more, through the endpoint:

- *one state*: at the default budgets, as a user with ``--jev-url`` gets it (the corpus sessions
  all fit one state);
- *windowed states*: with ``maxStateTokens`` set to half of what the prefix's one-line state
  needs (raised by a quarter at a time until its newest messages and one window fit), so the
  history is split into several windows (windows.py). A prefix whose newest messages outweigh
  all its one-line calls cannot be windowed and is counted apart.

The rankings compare the shipped model's keep_result over the messages with the same model over
the states, on the same calls: what reading states instead of outputs costs.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from ..compaction import CompactResult, compact, run_sync
from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing
from ..decide.archive import write_archive
from ..errors import CompactionError
from ..judge.features import feature_vector
from ..judge.model import JudgeModel, load_state_model
from ..options import CompactOptions
from ..state.fitting import state_base_tokens
from ..state.history import one_line_call
from ..state.questions import question_tokens
from ..state.tokens import estimate_tokens
from ..state.windows import WINDOWED, plan_requests
from .fit import Row
from .labels import OutputLabel
from .outcome import Context, Outcome, Scores, measure
from .state_fit import state_values

IN_PROCESS = "fast-jev in process (defaults)"
ONE_STATE = "fast-jev through Jev, one state"
WINDOWS = "fast-jev through Jev, windowed states"
FROM_MESSAGES = "fitted judge over the messages"
FROM_STATE = "fitted judge over the state"
FROM_WINDOWS = "fitted judge over windowed states"
MESSAGE_WEIGHTS_ON_STATE = "weights.json over the state"
HELD_OUT_MESSAGES = "fitted judge over the messages, held out"
HELD_OUT_STATE = "fitted judge over the state, held out"
# How long `fast-jev serve` may take to print its address: a guard against a hung start.
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Budgets:
    max_state_tokens: int
    max_request_tokens: int


@dataclass
class JevFigures:
    """What the compactions through the endpoint came to, beside the in-process ones."""

    url: str
    flag: str = "--serve"  # how the command line asked for it, for the page's regenerate line
    state_model: JudgeModel = field(default_factory=load_state_model)  # what the endpoint scores with
    points: int = 0
    outcomes: dict[str, Outcome] = field(default_factory=lambda: {IN_PROCESS: Outcome(), ONE_STATE: Outcome()})
    requests: int = 0  # one-state requests
    scores: Scores = field(default_factory=Scores)  # every ranked call: messages vs state
    rows: list[Row] = field(default_factory=list)  # the same calls, state features, group set by the caller
    # the fire points that could be windowed, compared on themselves
    windowed_points: int = 0
    unwindowable_points: int = 0
    windows: int = 0
    windowed_requests: int = 0
    windowed_tokens: int = 0  # estimated tokens on the wire of the windowed compactions
    windowed_outcomes: dict[str, Outcome] = field(
        default_factory=lambda: {IN_PROCESS: Outcome(), ONE_STATE: Outcome(), WINDOWS: Outcome()}
    )
    windowed_scores: Scores = field(default_factory=Scores)
    by_session: dict[str, Outcome] = field(default_factory=dict)  # session id -> the one-state compactions' totals


@dataclass(frozen=True)
class Point:
    """One fire point, as the in-process evaluation has measured it."""

    group: str
    session_id: str  # corpus.Session.session_id: what by_session is keyed by
    fraction: float
    head: list[SessionMessage]
    pairing: Pairing
    goal: str
    originals: dict[str, str]
    labels: Mapping[str, OutputLabel]
    fire: int
    before: int
    in_process: Outcome
    from_messages: Mapping[str, float]  # tool_use_id -> keep_result of the model over the messages


def compact_through(url: str, messages: Sequence[SessionMessage], archive: Path | None,
                    budgets: Budgets | None = None) -> tuple[CompactResult, dict[str, str]]:
    """The pipeline at its defaults (or ``budgets``) with the judge behind the Jev endpoint ``url``."""
    from ..jev.client import JevClient

    options = CompactOptions(archive_dir=str(archive) if archive is not None else None)
    if budgets is not None:
        options = replace(options, max_state_tokens=budgets.max_state_tokens,
                          max_request_tokens=budgets.max_request_tokens)

    async def run() -> CompactResult:
        async with JevClient(base_url=url) as client:
            return await compact(messages, client, options)

    result = run_sync(run())
    if result.archive:
        write_archive(result.archive)
    return result, dict(result.archive)


def windowed_budgets(point: Point) -> Budgets | None:
    """Budgets under which the prefix's state is windowed, or None when none can be."""
    one_line = state_base_tokens(point.goal) + sum(estimate_tokens(one_line_call(c)) for c in point.pairing.calls)
    costs = {call.id: question_tokens(call) for call in point.pairing.candidates}
    state = one_line // 2
    while state < one_line:
        budgets = Budgets(state, state + state // 5 + 200)
        try:
            requests = plan_requests(point.head, point.pairing, list(point.pairing.candidates), point.goal,
                                     CompactOptions().preserve_recent_messages, budgets.max_state_tokens,
                                     budgets.max_request_tokens, costs)
        except CompactionError:
            state += state // 4 + 1
            continue
        return budgets if requests and requests[0].stage == WINDOWED else None
    return None


def _measure(point: Point, result: CompactResult, archived: Mapping[str, str]) -> Outcome:
    context = Context.of(result.messages)
    return measure(point.pairing.calls, point.originals, point.labels, point.fire, context, point.before, archived)


def add_point(figures: JevFigures, point: Point, message_model: JudgeModel, archive: Path | None) -> None:
    """Compact ``point`` through the endpoint, in one state and in windows, and add what came of it."""
    figures.points += 1
    figures.outcomes[IN_PROCESS].add(point.in_process)
    result, archived = compact_through(figures.url, point.head, archive / "one-state" if archive else None)
    one_state = _measure(point, result, archived)
    figures.outcomes[ONE_STATE].add(one_state)
    figures.by_session.setdefault(point.session_id, Outcome()).add(one_state)
    figures.requests += result.stats.requests
    candidates = point.pairing.candidates
    if not candidates:
        return
    model = figures.state_model
    values = state_values(point.head, point.pairing, point.goal)
    from_state = {key: model.keep_result(v) for key, v in values.items()}
    for call in candidates:
        label = point.labels[call.tool_use_id].needed_after(point.fire)
        figures.scores.add(label, {FROM_MESSAGES: point.from_messages[call.tool_use_id],
                                   FROM_STATE: from_state[call.tool_use_id],
                                   MESSAGE_WEIGHTS_ON_STATE: message_model.keep_result(values[call.tool_use_id])})
        vector = tuple(feature_vector(values[call.tool_use_id]))
        since = point.fire - 1 - call.result_index
        figures.rows.append(Row(point.group, point.fraction, call.tool_use_id, vector, label, call.result_chars, since))

    budgets = windowed_budgets(point)
    if budgets is None:
        figures.unwindowable_points += 1
        return
    result, archived = compact_through(figures.url, point.head, archive / "windowed" if archive else None, budgets)
    figures.windowed_points += 1
    figures.windows += result.stats.windows
    figures.windowed_requests += result.stats.requests
    figures.windowed_tokens += result.stats.estimated_tokens
    figures.windowed_outcomes[IN_PROCESS].add(point.in_process)
    figures.windowed_outcomes[ONE_STATE].add(one_state)
    figures.windowed_outcomes[WINDOWS].add(_measure(point, result, archived))
    windowed_values = state_values(point.head, point.pairing, point.goal, budgets.max_state_tokens,
                                   budgets.max_request_tokens)
    windowed = {key: model.keep_result(v) for key, v in windowed_values.items()}
    for call in candidates:
        label = point.labels[call.tool_use_id].needed_after(point.fire)
        figures.windowed_scores.add(label, {FROM_MESSAGES: point.from_messages[call.tool_use_id],
                                            FROM_STATE: from_state[call.tool_use_id],
                                            FROM_WINDOWS: windowed[call.tool_use_id]})


@contextmanager
def served_judge() -> Iterator[str]:
    """``fast-jev serve`` started on 127.0.0.1 (a free port) for the duration; yields its Jev URL.

    The server runs isolated (``python -I``, from a scratch folder), so nothing from the current
    folder is imported."""
    with tempfile.TemporaryDirectory(prefix="fast-jev-eval-serve-") as scratch:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "fast_jev_compaction.cli", "serve", "--host", "127.0.0.1", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, cwd=scratch,
            env={k: v for k, v in os.environ.items() if not k.startswith("FAST_JEV_SERVE_")},
        )
        try:
            assert proc.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdout, selectors.EVENT_READ)
                ready = selector.select(timeout=_START_TIMEOUT_S)
            first = proc.stdout.readline() if ready else ""
            if " --jev-url " not in first:
                raise RuntimeError(f"fast-jev serve did not start: {first.strip() or 'no output'}")
            yield first.rsplit(" --jev-url ", 1)[1].strip()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
