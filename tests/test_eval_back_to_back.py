"""A project's sessions replayed back to back as one long session (``evaluation/back_to_back.py``),
reported apart from the sessions alone."""

from __future__ import annotations

from pathlib import Path

from eval_sessions import Transcript
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.evaluation.back_to_back import project_runs
from fast_jev_compaction.evaluation.corpus import load_sessions
from fast_jev_compaction.evaluation.replay import replay
from fast_jev_compaction.evaluation.replay_report import BACK_TO_BACK, rows, to_json
from test_eval_replay import REUSED_LINE, WINDOW, big_output


def task(session_id: str, started: str) -> Transcript:
    """One short task of its own: a prompt, a call, a reply."""
    return Transcript(session_id, started).prompt(f"task {session_id}").tool(
        "toolu_shared", "Bash", f"done {session_id}", command=f"make {session_id}"
    ).said(f"Task {session_id} is done.")


def test_a_project_s_sessions_run_in_the_order_recorded_and_a_lone_session_makes_no_run(tmp_path: Path) -> None:
    # Named against their order: the run follows the records' times, not the file names.
    task("late", "2026-03-02T09:00:00Z").write(tmp_path / "proj" / "a.jsonl")
    task("early", "2026-03-01T09:00:00Z").write(tmp_path / "proj" / "b.jsonl")
    task("middle", "2026-03-01T17:30:00Z").write(tmp_path / "proj" / "c.jsonl")
    task("alone", "2026-03-01T10:00:00Z").write(tmp_path / "other" / "d.jsonl")
    sessions, _ = load_sessions([tmp_path])
    (run,) = project_runs(sessions)
    by_name = {s.path.name: s for s in sessions}
    assert run.project == by_name["a.jsonl"].project and run.source == by_name["a.jsonl"].source
    assert [m.text for m in run.messages if m.role == "user" and m.text] == ["task early", "task middle", "task late"]
    # The three calls shared an id: each keeps its own result, the first one its id as it was.
    calls = pair_tool_calls(run.messages, 0).calls
    results = {r.tool_use_id: r.text for m in run.messages for r in m.toolResults or ()}
    assert [(c.input["command"], results[c.tool_use_id]) for c in calls] == [
        ("make early", "done early"), ("make middle", "done middle"), ("make late", "done late")
    ]
    assert calls[0].tool_use_id == "toolu_shared" and len({c.tool_use_id for c in calls}) == 3
    # Every other message is the session's own.
    early = by_name["b.jsonl"].messages
    assert run.messages[0] is early[0] and run.messages[-1] is by_name["a.jsonl"].messages[-1]


def test_an_output_a_later_session_reuses_is_counted_in_the_run_only(tmp_path: Path) -> None:
    """The first session reads a large file and crosses the trigger; the next one, recorded
    later, edits a line of it: a reuse only the project's run has."""
    first = Transcript("one", "2026-03-01T09:00:00Z").prompt("Find the shutdown step")
    first.tool("read1", "Read", big_output(), file_path="/src/scheduler.py")
    for k in range(4):
        first.tool(f"bash{k}", "Bash", f"ok {k}", command=f"echo {k}")
    first.said("The pool is closed in the scheduler's drain step.").write(tmp_path / "proj" / "one.jsonl")
    second = Transcript("two", "2026-03-01T11:00:00Z").prompt("Add a log line to the drain step")
    second.tool("edit1", "Edit", "The file has been updated.", file_path="/src/scheduler.py",
                old_string=REUSED_LINE, new_string="log the drain, then " + REUSED_LINE)
    second.said("Done.").write(tmp_path / "proj" / "two.jsonl")
    sessions, _ = load_sessions([tmp_path])
    report = replay(sessions, (WINDOW,))
    assert report.total(WINDOW).sessions == 2 and report.total(WINDOW).reuses == 0
    run = report.total(WINDOW, runs=True)
    assert (run.sessions, run.reuses, run.unrecoverable) == (1, 1, 0) and run.replaced >= 1
    labels = [row[1] for row in rows(report)]
    assert labels == ["all", sessions[0].source, f"all{BACK_TO_BACK}", f"{sessions[0].source}{BACK_TO_BACK}"]
    document = to_json(report)["windows"][str(WINDOW)]
    assert document["all"]["reuses"] == 0 and document["back_to_back"]["all"]["reuses"] == 1
