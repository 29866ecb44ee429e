"""The budget policy on its own: which outputs it cuts, how, and which calls it could cut at all."""

from __future__ import annotations

import itertools

import pytest

from fast_jev_compaction.conversation.pairing import RECENT_MESSAGES, ToolCall, is_recent
from fast_jev_compaction.decide.decisions import DROP, KEEP, TRUNCATE
from fast_jev_compaction.decide.policy import (
    CHEAP,
    CHEAP_MAX_CHARS,
    CUT_CHARS,
    MIN_DROP_CHARS,
    OLD_CUT_CHARS,
    OLD_MESSAGES,
    RECENT_CUT_CHARS,
    Scored,
    budget_decisions,
    could_cut,
    cut_over,
)
from fast_jev_compaction.options import CompactOptions

TOTAL = 100  # messages in the conversation the calls come from
RECENT = TOTAL - 2  # a result index in the last RECENT_MESSAGES messages
MIDDLE = TOTAL - 1 - RECENT_MESSAGES  # just before them
OLD = TOTAL - 1 - OLD_MESSAGES  # OLD_MESSAGES messages back


def call(chars: int, at: int = OLD, pinned: bool = False, n: int = 1) -> ToolCall:
    return ToolCall(f"t{n}", f"toolu_{n}", "Read", {"file_path": f"/src/f{n}.py"}, at - 1, at, chars, False, pinned)


def truncation_frees(c: ToolCall, action: str) -> int:
    """A digest frees all but 1,000 chars when the output is longer than 1,200; a drop frees it all."""
    if action == TRUNCATE:
        return c.result_chars - 1000 if c.result_chars > 1200 else 0
    return c.result_chars


def decide(*items: tuple[ToolCall, float], keep_floor: float = 1.0, target: float = 10**9) -> dict[str, str]:
    scored = [Scored(c, value, value) for c, value in items]
    decisions = budget_decisions(
        scored, target_chars=target, already_freed=0, keep_floor=keep_floor, freed_by=truncation_frees, messages_total=TOTAL
    )
    return {d.tool_use_id: d.action for d in decisions}


def test_recent_means_the_last_messages_before_the_end():
    assert is_recent(call(10, at=TOTAL - RECENT_MESSAGES), TOTAL)
    assert not is_recent(call(10, at=TOTAL - RECENT_MESSAGES - 1), TOTAL)


def test_the_cut_over_falls_with_age():
    assert [cut_over(call(10, at=at), TOTAL) for at in (RECENT, MIDDLE, OLD + 1, OLD)] == [
        RECENT_CUT_CHARS, CUT_CHARS, CUT_CHARS, OLD_CUT_CHARS
    ]
    assert RECENT_CUT_CHARS > CUT_CHARS > OLD_CUT_CHARS


def test_outputs_over_their_cut_over_are_truncated_whatever_the_judge_says():
    sizes_and_places = [
        (CUT_CHARS + 1, MIDDLE), (CUT_CHARS, MIDDLE), (CUT_CHARS + 500, RECENT), (RECENT_CUT_CHARS + 1, RECENT),
        (OLD_CUT_CHARS + 1, OLD), (OLD_CUT_CHARS, OLD),
    ]
    calls = [call(chars, at=at, n=n) for n, (chars, at) in enumerate(sizes_and_places)]
    actions = decide(*((c, 0.99) for c in calls))
    assert [actions[c.tool_use_id] for c in calls] == [TRUNCATE, KEEP, KEEP, TRUNCATE, TRUNCATE, KEEP]


def test_a_cheap_small_output_is_truncated_or_dropped_and_a_valued_one_stays():
    digestible = call(CHEAP_MAX_CHARS, n=1)
    too_short_for_a_digest = call(MIN_DROP_CHARS + 100, n=2)
    valued = call(CHEAP_MAX_CHARS, n=3)
    actions = decide((digestible, CHEAP / 2), (too_short_for_a_digest, CHEAP / 2), (valued, CHEAP))
    assert actions == {"toolu_1": TRUNCATE, "toolu_2": DROP, "toolu_3": KEEP}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(dict(chars=MIN_DROP_CHARS - 1), id="shorter than its marker would pay for"),
        pytest.param(dict(chars=CHEAP_MAX_CHARS + 1), id="past the size the judge ranks best"),
        pytest.param(dict(chars=1500, at=RECENT), id="recent"),
    ],
)
def test_a_cheap_output_stays_when_it_is_tiny_mid_sized_or_recent(spec):
    assert decide((call(**spec), 0.0)) == {"toolu_1": KEEP}


def test_the_floor_and_the_target_still_bound_the_cuts():
    big = call(CUT_CHARS * 3, n=1)
    assert decide((big, 0.7), keep_floor=0.6) == {"toolu_1": KEEP}
    # Least valued first: once the target is met, the rest stay.
    other = call(CUT_CHARS * 3, n=2)
    assert decide((big, 0.2), (other, 0.9), target=1) == {"toolu_1": TRUNCATE, "toolu_2": KEEP}


def test_could_cut_names_every_call_the_policy_cuts_for_some_answer():
    sizes = (
        10, MIN_DROP_CHARS - 1, MIN_DROP_CHARS, 1500, CHEAP_MAX_CHARS + 1, OLD_CUT_CHARS + 1, CUT_CHARS + 1,
        RECENT_CUT_CHARS + 1,
    )
    places = (OLD, MIDDLE, RECENT)
    answers = (0.0, CHEAP / 2, 0.5, 1.0)
    options = CompactOptions()
    for n, (chars, at) in enumerate(itertools.product(sizes, places)):
        c = call(chars, at=at, n=n)
        cut_by_some_answer = any(decide((c, value))[c.tool_use_id] != KEEP for value in answers)
        assert could_cut(c, TOTAL, options) == cut_by_some_answer, (chars, at)
        # Asked over the wire: every output the policy may cut at some age without the cheap rule.
        at_some_age = any(
            decide((call(chars, at=when, n=n), value))[f"toolu_{n}"] != KEEP
            for when in places for value in answers if value >= CHEAP
        )
        assert could_cut(c, TOTAL, options, remote=True) == at_some_age, (chars, at)


def test_could_cut_spares_pinned_calls_and_lets_the_threshold_policy_cut_any_other():
    assert not could_cut(call(10**6, pinned=True), TOTAL, CompactOptions())
    assert could_cut(call(10), TOTAL, CompactOptions(policy="threshold"))
    assert not could_cut(call(10), TOTAL, CompactOptions())
    # A floor of 0 keeps every output whatever the judge says.
    assert could_cut(call(1500), TOTAL, CompactOptions())
    assert not could_cut(call(10**6), TOTAL, CompactOptions(keep_floor=0.0))


def test_further_truncates_the_other_outputs_least_valuable_first_until_the_target():
    """With a window (``further``), outputs under their cut-over are cut too when the usual
    candidates fall short; never one valued at ``keep_floor`` or more, never more than needed."""
    small = [call(CUT_CHARS - 1000, n=n) for n in range(1, 5)]
    values = [0.7, 0.3, 0.5, 0.95]
    scored = [Scored(c, v, v) for c, v in zip(small, values)]
    needed = 2 * (CUT_CHARS - 2000)  # two digests' worth

    def actions(further: bool) -> list[str]:
        decisions = budget_decisions(
            scored, target_chars=needed, already_freed=0, keep_floor=0.9, freed_by=truncation_frees,
            messages_total=TOTAL, further=further,
        )
        return [d.action for d in decisions]

    assert actions(False) == [KEEP] * 4
    assert actions(True) == [KEEP, TRUNCATE, TRUNCATE, KEEP]


def test_further_drops_a_short_output_with_its_call_unless_its_input_is_long():
    """Outputs too short for a digest that pays leave with their call when the window still
    needs room, least valuable first; a call whose long input only rung b may move whole stays."""
    short = call(1000, n=1)
    long_input = ToolCall("t2", "toolu_2", "Bash", {"command": "cat <<EOF\n" + "x" * 2000}, OLD - 1, OLD, 1000, False, False)
    kept = call(1000, n=3)
    scored = [Scored(short, 0.1, 0.1), Scored(long_input, 0.05, 0.05), Scored(kept, 0.6, 0.6)]
    decisions = budget_decisions(
        scored, target_chars=1500, already_freed=0, keep_floor=1.0, freed_by=truncation_frees,
        messages_total=TOTAL, further=True,
    )
    assert [d.action for d in decisions] == [DROP, KEEP, DROP]
    decisions = budget_decisions(
        scored, target_chars=500, already_freed=0, keep_floor=1.0, freed_by=truncation_frees,
        messages_total=TOTAL, further=True,
    )
    assert [d.action for d in decisions] == [DROP, KEEP, KEEP]


def test_budget_decisions_keep_an_output_valued_exactly_at_the_floor():
    big = call(CUT_CHARS * 3, n=1)
    assert decide((big, 0.6), keep_floor=0.6) == {"toolu_1": KEEP}
    assert decide((big, 0.59), keep_floor=0.6) == {"toolu_1": TRUNCATE}
    # Nor does the window's further cut take it.
    short = call(1500, at=RECENT, n=2)
    decisions = budget_decisions(
        [Scored(short, 0.6, 0.6)], target_chars=10**9, already_freed=0, keep_floor=0.6, freed_by=truncation_frees,
        messages_total=TOTAL, further=True,
    )
    assert [d.action for d in decisions] == [KEEP]


def test_budget_decisions_cut_the_larger_of_two_equally_valued_outputs_first():
    smaller, larger = call(CUT_CHARS * 2, n=1), call(CUT_CHARS * 3, n=2)
    # The target is met by either one: the one cut is the one that frees more.
    assert decide((smaller, 0.3), (larger, 0.3), target=1) == {"toolu_1": KEEP, "toolu_2": TRUNCATE}
    assert decide((larger, 0.3), (smaller, 0.3), target=1) == {"toolu_1": KEEP, "toolu_2": TRUNCATE}


def test_budget_decisions_cheap_tier_starts_at_min_drop_chars_and_drops_only_cheap_outputs():
    assert decide((call(MIN_DROP_CHARS), CHEAP / 2)) == {"toolu_1": DROP}
    assert decide((call(MIN_DROP_CHARS - 1), CHEAP / 2)) == {"toolu_1": KEEP}
    assert decide((call(MIN_DROP_CHARS), CHEAP)) == {"toolu_1": KEEP}

    def digest_never_pays(c: ToolCall, action: str) -> int:
        return 0 if action == TRUNCATE else c.result_chars

    # Over its cut-over but not cheap: only a digest cuts it, so one that frees nothing leaves it whole.
    for value, expected in ((0.5, KEEP), (CHEAP / 2, KEEP)):
        decisions = budget_decisions(
            [Scored(call(CUT_CHARS * 3), value, value)], target_chars=10**9, already_freed=0, keep_floor=1.0,
            freed_by=digest_never_pays, messages_total=TOTAL,
        )
        assert [d.action for d in decisions] == [expected]
    # A cheap one whose digest frees nothing leaves with its call.
    decisions = budget_decisions(
        [Scored(call(CHEAP_MAX_CHARS), CHEAP / 2, CHEAP / 2)], target_chars=10**9, already_freed=0, keep_floor=1.0,
        freed_by=digest_never_pays, messages_total=TOTAL,
    )
    assert [d.action for d in decisions] == [DROP]
