"""Generated sessions with planted facts the next turn needs, compacted at the defaults.

The issue's held-out bar, on sessions of our own making (tests/planted_sessions.py): at least
95 % of the facts stay in the context, every one is recoverable, at least 70 % of the tool I/O is
removed, every removed call leaves a marker, no tool_use or tool_result is orphaned, and the
prose is byte for byte the input's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

import pytest

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.conversation.sizes import input_chars
from fast_jev_compaction.decide.archive import write_archive
from fast_jev_compaction.decide.markers import saved_path
from fast_jev_compaction.evaluation.through_jev import served_judge
from fast_jev_compaction.jev.client import JevClient
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.options import CompactOptions
from planted_sessions import planted_session

SEEDS = range(20)
DROP_MARK = "[fast-jev-compaction: the "


def tool_io(messages) -> int:
    return sum(input_chars(u.input) for m in messages for u in m.toolUses) + sum(
        len(r.text) for m in messages for r in m.toolResults or ()
    )


def test_planted_facts_stay_in_context_and_every_cut_is_recoverable(tmp_path: Path) -> None:
    check_planted(tmp_path, SEEDS, LocalJudge)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """`fast-jev serve` on loopback, a real subprocess; yields its Jev URL."""
    with served_judge() as url:
        yield url


def test_the_same_holds_through_a_jev_protocol_endpoint(tmp_path: Path, served: str) -> None:
    """Through `fast-jev serve` on loopback: the judge reads states (notes and digests), not the
    messages, and the budget, the rules, the markers and the archive do the same work."""
    check_planted(tmp_path, range(5), lambda: JevClient(base_url=served), requests=True)


def test_a_session_that_needs_several_windows_compacts_as_well_as_in_one_state(tmp_path: Path, served: str) -> None:
    """Long sessions whose state is split into windows (small budgets) keep the facts, the
    recoverability and the reduction they have when the same sessions fit one state."""
    seeds = range(3)
    tight = CompactOptions(max_state_tokens=1500, max_request_tokens=2200)
    one = check_planted(tmp_path / "one", seeds, lambda: JevClient(base_url=served), requests=True, old_calls=60)
    windowed = check_planted(tmp_path / "windowed", seeds, lambda: JevClient(base_url=served), requests=True,
                             old_calls=60, options=tight)
    # States are sized by the calls each request asks about, so even default budgets may split a
    # long session; the tight ones must split every session, and into more windows.
    assert windowed.windows >= 2 * len(seeds) and windowed.windows > one.windows
    assert windowed.in_context >= one.in_context - 1
    assert windowed.reduction >= one.reduction - 0.02


@dataclass
class Figures:
    facts: int
    in_context: int
    reduction: float
    windows: int  # summed over the sessions


def check_planted(tmp_path: Path, seeds, make_judge, requests: bool = False, old_calls: int = 0,
                  options: CompactOptions | None = None) -> Figures:
    facts = in_context = recoverable = windows = 0
    before = after = 0
    for seed in seeds:
        session = planted_session(seed, old_calls)
        archive = tmp_path / f"archive-{seed}"
        opts = replace(options or CompactOptions(), archive_dir=str(archive))
        result = compact_sync(session.messages, make_judge(), opts)
        assert (result.stats.requests > 0) == requests
        windows += result.stats.windows
        write_archive(result.archive)
        out = result.messages
        context = "\n".join([m.text for m in out] + [r.text for m in out for r in m.toolResults or ()])
        saved = {p for p in (saved_path(line) for line in context.splitlines()) if p}
        saved_texts = [Path(p).read_text(encoding="utf-8") for p in saved]
        for fact in session.facts.values():
            facts += 1
            if fact in context:
                in_context += 1
                recoverable += 1
            elif any(fact in text for text in saved_texts):
                recoverable += 1
        before += tool_io(session.messages)
        after += tool_io(out)

        # Every removed call left a marker; no orphans; prose verbatim and in order.
        uses = {u.tool_use_id for m in out for u in m.toolUses}
        results = {r.tool_use_id for m in out for r in m.toolResults or ()}
        assert uses == results
        removed = {u.tool_use_id for m in session.messages for u in m.toolUses} - uses
        assert sum(m.text.count(DROP_MARK) for m in out) == len(removed)
        prose = [(m.role, "\n".join(l for l in m.text.split("\n") if not l.startswith(DROP_MARK))) for m in out]
        source = iter((m.role, m.text) for m in session.messages)
        assert all(any(p == s for s in source) for p in prose)

    assert recoverable == facts
    assert in_context / facts >= 0.95, (in_context, facts)
    assert 1 - after / before >= 0.70, 1 - after / before
    return Figures(facts, in_context, 1 - after / before, windows)
