"""``fast-jev eval --replay``: sessions replayed message by message, compacted where the plugin and
the engine would, each reuse checked when it happens; over transcripts written here line by line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

import pytest

from eval_sessions import Transcript
from fast_jev_compaction.compaction import CompactResult
from fast_jev_compaction.conversation.messages import SessionMessage
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.conversation.transcript import read_messages
from fast_jev_compaction.decide.policy import CHARS_PER_TOKEN
from fast_jev_compaction.evaluation.corpus import load_sessions
from fast_jev_compaction.evaluation.replay import SUMMARY_TOKENS, compact_pass, replay, replay_session
from fast_jev_compaction.evaluation.replay_report import SECTION_END, SECTION_START, section_of, text_report, with_section
from fast_jev_compaction.options import CompactOptions

# A line of the big output that comes back later, far from its opening and its closing.
REUSED_LINE = "the scheduler drains every pending queue before closing the worker pool"


def big_output() -> str:
    """About 21,000 characters of distinct numbered lines, the reused one in the middle."""
    lines = [f"record {n:04d} stores value {n * 7919 % 10007} for account holder {n}" for n in range(400)]
    lines[200] = REUSED_LINE
    return "\n".join(lines)


def reused_after_the_trigger(session_id: str = "reuse") -> Transcript:
    """A large Read, small calls, the end of a turn past 60 % of an 8,000-token window, then an
    Edit quoting a line from the middle of the Read. The prompts share no term with that line, so
    the digest's lines the goal names do not keep it."""
    t = Transcript(session_id).prompt("Find the shutdown step")
    t.tool("read1", "Read", big_output(), file_path="/src/scheduler.py")
    for k in range(4):
        t.tool(f"bash{k}", "Bash", f"ok {k}", command=f"echo {k}")
    t.said("The pool is closed in the scheduler's drain step.").prompt("Add a log line there")
    t.tool("edit1", "Edit", "The file has been updated.", file_path="/src/scheduler.py",
           old_string=REUSED_LINE, new_string="log the drain, then " + REUSED_LINE)
    return t.said("Done.")


WINDOW = 8_000


def messages_of(t: Transcript, tmp_path: Path) -> list[SessionMessage]:
    return read_messages(t.write(tmp_path / f"{t.session_id}.jsonl"))


def test_a_large_output_reused_after_the_trigger_is_recoverable(tmp_path: Path) -> None:
    messages = messages_of(reused_after_the_trigger(), tmp_path)
    tokens = sum(map(message_chars, messages)) / CHARS_PER_TOKEN
    assert 0.6 * WINDOW < tokens < 0.95 * WINDOW  # only the plugin's trigger can fire
    tally = replay_session(messages, WINDOW)
    assert (tally.passes, tally.replaced, tally.summaries, tally.failures) == (1, 1, 0, [])
    # the Edit's quote is no longer in the live context, and the marker's archived file holds it
    assert (tally.reuses, tally.gone, tally.unrecoverable, tally.summarized) == (1, 1, 0, 0)
    assert tally.over_target == (tally.after[0] > 40)


def test_an_output_cut_then_evicted_with_its_turn_is_recoverable_through_the_turns_file(tmp_path: Path) -> None:
    """The first pass cuts the Read to its digest; the second evicts the Read's turn, digest and
    marker with it, so no marker in view names the Read's file: the index line names the turn's
    file, whose digest names the Read's."""
    evictions: list[int] = []

    def watched(messages: Sequence[SessionMessage], options: CompactOptions, archive: Mapping[str, str]) -> CompactResult:
        result = compact_pass(messages, options, archive)
        evictions.append(result.stats.evicted_turns)
        return result

    t = Transcript("chain").prompt("Start").said("Ready.").prompt("Find the shutdown step")
    t.tool("read1", "Read", big_output(), file_path="/src/scheduler.py")
    t.said("The pool is closed in the scheduler's drain step.").prompt("Now list the jobs")
    for k in range(9):
        jobs = "\n".join(f"job {k}-{n} queued at slot {n * 13 % 97} on node {n % 7}" for n in range(80))
        t.tool(f"bash{k}", "Bash", jobs, command=f"jobs {k}")
    t.said("Listed.").prompt("Add a log line there")
    t.tool("edit1", "Edit", "The file has been updated.", file_path="/src/scheduler.py",
           old_string=REUSED_LINE, new_string="log the drain, then " + REUSED_LINE)
    tally = replay_session(messages_of(t.said("Done."), tmp_path), WINDOW, compactor=watched)
    assert evictions == [0, 1] and (tally.replaced, tally.summaries) == (2, 0)
    assert (tally.reuses, tally.gone, tally.unrecoverable) == (1, 1, 0)


def test_without_a_compaction_before_it_a_reuse_is_not_counted(tmp_path: Path) -> None:
    messages = messages_of(reused_after_the_trigger(), tmp_path)
    tally = replay_session(messages, 200_000)
    assert (tally.passes, tally.reuses) == (0, 0)


def test_a_pass_over_target_because_of_the_last_prompt_alone_is_counted_unreachable(tmp_path: Path) -> None:
    """The user's last prompt, a pasted log of over half the window, stays whole: the pass cuts
    the Read and replaces the context, which stays over the target; the count says why."""
    t = Transcript("pasted").prompt("Find the shutdown step")
    t.tool("read1", "Read", big_output(), file_path="/src/scheduler.py")
    t.said("Found it.").prompt("Thanks").said("Glad to help.")
    t.prompt("Here is the log:\n" + "".join(f"log line {n:04d}: step ok\n" for n in range(600)))
    t.tool("make1", "Bash", "".join(f"compiled unit {n:04d} in {n * 37 % 101} ms\n" for n in range(200)), command="make")
    t.tool("ls1", "Bash", "a.py", command="ls")
    t.said("Read the log.")
    tally = replay_session(messages_of(t, tmp_path), WINDOW)
    assert tally.replaced >= 1 and tally.over_target >= 1
    assert tally.unreachable == tally.over_target
    # A session whose passes reach the target counts none.
    plain = replay_session(messages_of(reused_after_the_trigger(), tmp_path), WINDOW)
    assert plain.unreachable == 0


def test_a_session_with_nothing_to_prune_falls_to_the_built_in_summary(tmp_path: Path) -> None:
    t = Transcript("prose").prompt("Explain the design")
    t.tool("ls1", "Bash", "a.py b.py", command="ls")
    t.said("word " * 8_000)  # 40,000 chars: 11,400 tokens, over 95 % of the window in one reply
    messages = messages_of(t, tmp_path)
    tally = replay_session(messages, WINDOW)
    # the plugin's pass frees nothing and skips; the engine's cannot fit either: the summary runs
    assert (tally.passes, tally.skipped, tally.replaced, tally.summaries, tally.failures) == (2, 1, 0, 1, [])


def test_a_pass_that_raises_is_a_failure_and_the_context_restarts_from_the_summary(tmp_path: Path) -> None:
    def breaks(messages: Sequence[SessionMessage], options: CompactOptions, archive: Mapping[str, str]) -> CompactResult:
        raise RuntimeError("judge down")

    reused_after_the_trigger().write(tmp_path / "s" / "s.jsonl")
    sessions, _ = load_sessions([tmp_path / "s"])
    report = replay(sessions, (WINDOW,), compactor=breaks)
    tally = report.total(WINDOW)
    assert (tally.passes, tally.failures, tally.summaries, tally.replaced) == (1, ["RuntimeError: judge down"], 0, 0)
    assert (tally.reuses, tally.gone, tally.unrecoverable, tally.summarized) == (1, 1, 1, 1)  # no marker survives
    assert "1 pass(es) raised; the first: 8,000: RuntimeError: judge down" in text_report(report)


def test_the_plugin_fires_once_per_upward_crossing_and_again_ten_points_higher(tmp_path: Path) -> None:
    """Turns ending at 62 %, 65 %, 68 % and 73 % of the window: prose, so each pass skips and
    the context stays where it was; the trigger fires at 62 % and at 73 %."""
    seen: list[float] = []

    def watched(messages: Sequence[SessionMessage], options: CompactOptions, archive: Mapping[str, str]) -> CompactResult:
        seen.append(round(100 * options.context_tokens / options.window_tokens))
        # Without the window the ladder stays at the pass, which finds no tool output to cut.
        return compact_pass(messages, dataclasses.replace(options, window_tokens=0), archive)

    t = Transcript("climb")
    chars = 0.0
    for percent in (62, 65, 68, 73):
        t.prompt("go on")
        t.said("z" * int((percent / 100 * WINDOW) * CHARS_PER_TOKEN - chars - len("go on")))
        chars = percent / 100 * WINDOW * CHARS_PER_TOKEN
    t.tool("ls1", "Bash", "a.py", command="ls")
    t.said("end")
    tally = replay_session(messages_of(t, tmp_path), WINDOW, compactor=watched)
    assert seen == [62, 73]
    assert (tally.passes, tally.skipped) == (2, 2)


def test_a_built_in_summary_leaves_a_summary_sized_stub(tmp_path: Path) -> None:
    sizes: list[int] = []

    def after(messages: Sequence[SessionMessage], options: CompactOptions, archive: Mapping[str, str]) -> CompactResult:
        sizes.append(sum(map(message_chars, messages)))
        return compact_pass(messages, options, archive)

    t = Transcript("prose").prompt("Explain the design")
    t.tool("ls1", "Bash", "a.py b.py", command="ls")
    t.said("word " * 8_000).prompt("And the tests?").said("word " * 2_000)
    tally = replay_session(messages_of(t, tmp_path), WINDOW, compactor=after)
    assert tally.summaries == 1
    # after the summary, the stub, the next prompt and its reply (10,000 chars) cross 60 % again
    assert sizes[-1] == SUMMARY_TOKENS * CHARS_PER_TOKEN + len("And the tests?") + 10_000


def test_replay_sums_each_source_apart(tmp_path: Path) -> None:
    reused_after_the_trigger("one").write(tmp_path / "alpha" / "one.jsonl")
    reused_after_the_trigger("two").write(tmp_path / "beta" / "p" / "two.jsonl")
    reused_after_the_trigger("three").write(tmp_path / "beta" / "p" / "three.jsonl")
    sessions, skipped = load_sessions([tmp_path])
    assert not skipped
    report = replay(sessions, (WINDOW, 200_000))
    assert {w: sorted(s) for w, s in report.by_window.items()} == {WINDOW: ["alpha", "beta"], 200_000: ["alpha", "beta"]}
    by_source = report.by_window[WINDOW]
    assert (by_source["alpha"].sessions, by_source["beta"].sessions) == (1, 2)
    assert (by_source["alpha"].passes, by_source["beta"].passes) == (1, 2)
    assert report.total(WINDOW).reuses == 3


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fast_jev_compaction.cli", "eval", *args],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})


def test_the_cli_replays_at_the_windows_asked_and_the_sources_kept(tmp_path: Path) -> None:
    reused_after_the_trigger("one").write(tmp_path / "alpha" / "one.jsonl")
    reused_after_the_trigger("two").write(tmp_path / "beta" / "two.jsonl")
    proc = _eval(str(tmp_path), "--replay", "--window", "8000", "--window", "9000", "--source", "beta", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert list(document["windows"]) == ["8000", "9000"]
    assert list(document["windows"]["8000"]["sources"]) == ["beta"]
    whole = document["windows"]["8000"]["all"]
    assert (whole["sessions"], whole["passes"], whole["reuses"], whole["unrecoverable"]) == (1, 1, 1, 0)
    assert whole["gone_share"] == 1.0 and whole["unrecoverable_share"] == 0.0

    proc = _eval(str(tmp_path), "--replay", "--json")
    assert list(json.loads(proc.stdout)["windows"]) == ["32000", "64000", "200000"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replay", "--window", "0"], "expected a number above 0"),
        (["--replay", "--window", "32k"], "expected a whole number"),
        (["--window", "32000"], "--window and --overhead go with --replay"),
        (["--replay", "--frontier"], "not with --fit, --fit-state, --frontier or --prefix-fills"),
        (["--replay", "--prefix-fills", "60"], "not with --fit"),
    ],
)
def test_the_cli_refuses_what_a_replay_cannot_mean(tmp_path: Path, args: list[str], message: str) -> None:
    reused_after_the_trigger().write(tmp_path / "s.jsonl")
    proc = _eval(str(tmp_path), *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_the_replay_section_leads_the_page_and_the_fire_points_keep_it(tmp_path: Path) -> None:
    page = tmp_path / "quality.md"
    page.write_text("# Quality\n\nGenerated by the fire points.\n\n## Post-fire loss\n\ntable\n", encoding="utf-8")
    reused_after_the_trigger().write(tmp_path / "s" / "s.jsonl")
    proc = _eval(str(tmp_path / "s"), "--replay", "--window", "8000", "--markdown", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text(encoding="utf-8")
    assert text.index("Generated by the fire points.") < text.index(SECTION_START) < text.index("## Post-fire loss")
    # the Read (21,000 characters) is more than the room the target leaves: foresight loses it too
    assert "| 8,000 | all | 1 | 1 | 1 | 0 | 0 | 1 | 1 (100.0%) | 1 of 1 (100.0%) | 0 (0.0%) | 0 |" in text
    assert f"Generated by `fast-jev eval --replay --window 8000 --markdown {page}`" in text
    again = with_section(text, section_of(text) or "")
    assert again == text and text.count(SECTION_END) == 1


def test_a_served_judge_meters_each_pass_without_changing_the_replay(tmp_path: Path) -> None:
    from fast_jev_compaction.evaluation.through_jev import served_judge

    reused_after_the_trigger("one").write(tmp_path / "alpha" / "one.jsonl")
    sessions, _ = load_sessions([tmp_path])
    plain = replay(sessions, (WINDOW,)).total(WINDOW)
    with served_judge() as url:
        metered = replay(sessions, (WINDOW,), judge_url=url).total(WINDOW)
    assert len(metered.judge_tokens) == metered.passes == 1 and metered.judge_tokens[0] > 0
    assert plain.judge_tokens == [] and {**vars(metered), "judge_tokens": []} == vars(plain)


def test_the_cli_meters_judge_tokens_with_serve(tmp_path: Path) -> None:
    reused_after_the_trigger().write(tmp_path / "s.jsonl")
    proc = _eval(str(tmp_path), "--replay", "--serve", "--window", "8000", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["judge_url"].startswith("http://127.0.0.1:")
    assert document["windows"]["8000"]["all"]["judge_tokens_max"] > 0


def test_the_replay_section_goes_before_a_generated_section_it_finds_first() -> None:
    from fast_jev_compaction.evaluation.report import PREFIX_FILLS_END, PREFIX_FILLS_START, prefix_fills_of, with_prefix_fills

    fills = f"{PREFIX_FILLS_START}\n## Prefixes in a window they fill\n\ntable\n{PREFIX_FILLS_END}"
    page = with_prefix_fills("# Quality\n\nintro\n\n## Fire points\n\nfigures\n", fills)
    replay_section = f"{SECTION_START}\n## Session replay\n\nrows\n{SECTION_END}"
    both = with_section(page, replay_section)
    assert both.index("intro") < both.index(SECTION_END) < both.index(PREFIX_FILLS_START) < both.index("## Fire points")
    assert section_of(both) == replay_section and prefix_fills_of(both) == fills
    assert with_prefix_fills(both, fills) == both == with_section(both, replay_section)
