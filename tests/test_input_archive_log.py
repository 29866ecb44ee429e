"""A call whose output is cut and whose long input is moved in the same pass names both files:
the output's in ``archive_path`` (its truncation note's), the input's in ``input_archive_path``
(its input marker's), in the decision, in the decision log the CLI and the hook write, and in
``fast-jev log``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fast_jev_compaction.audit import DecisionLog
from fast_jev_compaction.audit.cli_record import record_cli_compaction
from fast_jev_compaction.compaction import CompactResult
from fast_jev_compaction.conversation.messages import SessionMessage
from fast_jev_compaction.decide.archive import archive_path
from fast_jev_compaction.decide.decisions import INPUT_ARCHIVED, KEEP, TRUNCATE
from fast_jev_compaction.hook.outcome import Outcome
from fast_jev_compaction.hook.record import record_outcome
from scripted_asker import assistant, pair, user
from test_ladder import by_id, run

PROMPT = "Look into this. " * 300
OUTPUT = "\n".join(f"out line {n}: result value {n * 7}" for n in range(600))


def both_cut_session() -> list[SessionMessage]:
    """A Task with a long prompt and a long output, then calls and prose a pass never pins."""
    messages = [user("survey the code")]
    messages += pair("task", OUTPUT, "Task", description="survey", prompt=PROMPT)
    messages += pair("other", "x\n" * 10, "Bash", command="ls")
    return [*messages, user("now the last step"), assistant("ok"), user("more"), assistant("fine")]


def compacted(tmp_path: Path) -> CompactResult:
    out = run(both_cut_session(), window=1000, values={"task": 0.0}, archive_dir=str(tmp_path / "archive"))
    made = by_id(out)["task"]
    assert (made.action, made.reason) == (TRUNCATE, INPUT_ARCHIVED), made
    return out


def test_a_call_whose_output_and_input_are_cut_in_one_pass_names_both_files(tmp_path: Path) -> None:
    out = compacted(tmp_path)
    made = by_id(out)["task"]
    output_file, input_file = archive_path(str(tmp_path / "archive"), OUTPUT), archive_path(str(tmp_path / "archive"), PROMPT)
    assert (made.archive_path, made.input_archive_path) == (output_file, input_file)
    assert out.archive[output_file] == OUTPUT and out.archive[input_file] == PROMPT
    # The files the model is pointed at are the ones the decision names.
    [task] = [u for m in out.messages for u in m.toolUses if u.tool_use_id == "task"]
    [shown] = [r.text for m in out.messages for r in m.toolResults or () if r.tool_use_id == "task"]
    assert f"saved at {input_file};" in task.input["prompt"] and f"saved at {output_file};" in shown
    assert by_id(out)["other"].input_archive_path is None


def test_a_kept_output_names_only_its_input_file(tmp_path: Path) -> None:
    body = "print('hello')\n" * 400
    messages = [user("build"), *pair("write", "File created successfully", "Write", file_path="/src/app.py", content=body)]
    messages += [user("next"), assistant("ok"), user("more"), assistant("fine")]
    out = run(messages, window=500, archive_dir=str(tmp_path))
    made = by_id(out)["write"]
    assert (made.action, made.reason) == (KEEP, INPUT_ARCHIVED), made
    assert (made.archive_path, made.input_archive_path) == (None, archive_path(str(tmp_path), body))


def test_the_log_the_cli_and_the_hook_write_holds_both_files_and_fast_jev_log_shows_them(tmp_path: Path) -> None:
    out = compacted(tmp_path)
    made = by_id(out)["task"]
    cli_db, hook_db = tmp_path / "cli.sqlite", tmp_path / "hook.sqlite"
    record_cli_compaction(cli_db, "s1", "local", out)
    record_outcome(hook_db, None, Outcome(answer={"action": "replace"}, action="replaced", reason="", result=out, judge="local"))
    for db in (cli_db, hook_db):
        with DecisionLog(db, create=False) as log:
            [compaction] = log.compactions()
            [row] = [d for d in log.decisions_for(compaction.id or 0) if d.tool_use_id == "task"]
        assert (row.reason, row.archive_path, row.input_archive_path) == (INPUT_ARCHIVED, made.archive_path, made.input_archive_path)
        proc = subprocess.run(
            [sys.executable, "-m", "fast_jev_compaction.cli", "log", "--db", str(db), "--json", "-n", "0"],
            capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        [shown] = [d for c in json.loads(proc.stdout)["compactions"] for d in c["decisions"] if d["tool_use_id"] == "task"]
        assert (shown["archive_path"], shown["input_archive_path"]) == (made.archive_path, made.input_archive_path)
