"""Option resolution (upstream §6.1, §8.1 "options", regression 02's resolve side)."""

from __future__ import annotations

import math

import pytest

from fast_jev_compaction.options import OPTIONS, VALUES, CompactOptions, resolve_options


def test_defaults_match_upstream():
    opts = resolve_options()
    assert opts.goal == ""
    assert opts.keep_threshold == 0.5
    assert opts.preserve_recent_messages == 6
    assert opts.max_state_tokens == 25_000
    assert opts.max_request_tokens == 30_000
    # Ours: a cut keeps an 800-char digest (opening, closing, key lines, ids) whose opening is 250
    # chars (upstream kept a 300-char head only); chosen from the corpus evaluation (policy.py).
    assert opts.truncate_head_chars == 250
    assert opts.max_concurrent_requests == 4
    assert (opts.digest_chars, opts.policy, opts.target_reduction, opts.keep_floor) == (800, "budget", 0.9, 1.0)
    assert (opts.archive_dir, opts.use_rules) == (None, True)
    # The dataclass defaults are the same resolved values, so CompactOptions() is safe to use.
    assert CompactOptions() == opts


def test_nan_threshold_falls_back_to_half():
    assert resolve_options(keep_threshold=math.nan).keep_threshold == 0.5


def test_counts_are_floored_and_clamped():
    opts = resolve_options(preserve_recent_messages=2.7, truncate_head_chars=-1.2)
    assert opts.preserve_recent_messages == 2
    assert opts.truncate_head_chars == 0
    assert resolve_options(preserve_recent_messages=-3).preserve_recent_messages == 0


@pytest.mark.parametrize("value, expected", [(0, 1), (-5, 1), (0.9, 1), (2.9, 2), (8, 8)])
def test_max_concurrent_requests_is_at_least_one_and_whole(value, expected):
    assert resolve_options(max_concurrent_requests=value).max_concurrent_requests == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "3", None, True])
def test_non_finite_or_non_numeric_values_fall_back_to_defaults(value):
    opts = resolve_options(
        preserve_recent_messages=value,
        max_state_tokens=value,
        max_request_tokens=value,
        truncate_head_chars=value,
        max_concurrent_requests=value,
    )
    assert (opts.preserve_recent_messages, opts.max_state_tokens, opts.max_request_tokens) == (6, 25_000, 30_000)
    assert (opts.truncate_head_chars, opts.max_concurrent_requests) == (250, 4)


def test_token_budgets_are_at_least_one_but_not_floored():
    opts = resolve_options(max_state_tokens=0, max_request_tokens=-10)
    assert opts.max_state_tokens == 1 and opts.max_request_tokens == 1
    assert resolve_options(max_state_tokens=1234.5).max_state_tokens == 1234.5


def test_empty_goal_stays_empty_and_a_goal_is_kept():
    assert resolve_options(goal=None).goal == ""
    assert resolve_options(goal="ship it").goal == "ship it"


@pytest.mark.parametrize("value", [-0.1, 1.01, 2, -1])
def test_threshold_outside_unit_interval_is_rejected(value):
    with pytest.raises(ValueError, match="keepThreshold must be between 0 and 1"):
        resolve_options(keep_threshold=value)


@pytest.mark.parametrize("value", [0, 1, 0.25])
def test_threshold_bounds_are_accepted(value):
    assert resolve_options(keep_threshold=value).keep_threshold == value


@pytest.mark.parametrize("name", ["target_reduction", "keep_floor"])
def test_shares_are_checked_not_clamped(name):
    with pytest.raises(ValueError, match="between 0 and 1"):
        resolve_options(**{name: 1.5})
    assert getattr(resolve_options(**{name: 0.25}), name) == 0.25


def test_an_unknown_policy_takes_the_default():
    assert resolve_options(policy="cliff").policy == "budget"
    assert resolve_options(policy="threshold").policy == "threshold"


def test_the_values_model_is_the_table() -> None:
    schema = VALUES.json_schema()
    assert list(schema["properties"]) == [option.name for option in OPTIONS] and not schema.get("required")
    assert schema["properties"]["keep_threshold"] == {"maximum": 1, "minimum": 0, "title": "Keep Threshold", "type": "number"}
    assert schema["properties"]["policy"]["enum"] == ["budget", "threshold"]
    assert VALUES.validate_python({"preserve_recent_messages": 6.0}) == {"preserve_recent_messages": 6}
