"""Issue 6's reproductions, each against the real hook process, real files and real servers.

Secrets never leave (Jev body, decision log, hook.log); every file is private from creation;
a slow judge cannot push the answer past timeoutSeconds; lone surrogates and NULs never cost
a compaction or the answer; the per-user temp log folder refuses what it cannot trust.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jev_fault_server import FaultServer, Reply, Seen, answers_body
from test_hook_entry import _bash, event, hook_env, tool_heavy_conversation
from test_redaction import SECRETS

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "fast_jev_hook.py"
SAFETY_TIMEOUT = 120


def run_hook(doc: Any, data: Path, *, timeout: float = SAFETY_TIMEOUT, cwd: Path | None = None, **env: str) -> dict[str, Any]:
    """The mod's call: ``python -I hooks/fast_jev_hook.py``, JSON on stdin, killed at ``timeout``."""
    stdin = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    proc = subprocess.run(
        [sys.executable, "-I", str(HOOK)],
        input=stdin,
        capture_output=True,
        env=hook_env(data, **env),
        timeout=timeout,
        cwd=cwd,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    lines = proc.stdout.decode("utf-8").splitlines()
    assert len(lines) == 1, proc.stdout[:500]
    return json.loads(lines[0])


def rows(data: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(data / "decisions.sqlite") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM compactions ORDER BY id")]


def judge_drops_everything(seen: Seen) -> Reply:
    return Reply(body=answers_body(list(seen.json()["questions"]), value=0.05))


# --------------------------------------------------------------------------- secrets


def secret_conversation() -> list[dict[str, Any]]:
    """Every kind of secret, in prompts (goal and context) and in tool inputs (history)."""
    planted = [text for text, _ in SECRETS.values()]
    messages: list[dict[str, Any]] = [
        {"role": "user", "text": "set up the deploy. " + " ; ".join(planted[:10]), "toolUses": [], "handle": "h-0"}
    ]
    for index, text in enumerate(planted):
        # Outputs the budget policy could cut, so the judge is asked about them.
        messages += _bash(index, f"run {text}", "output line\n" * 600)
    messages.append({"role": "user", "text": "and now: " + " ; ".join(planted[10:]), "toolUses": [], "handle": "h-1"})
    messages.append({"role": "assistant", "text": "Done.", "toolUses": [], "handle": "h-2"})
    return messages


def leaked(text: str) -> list[str]:
    return [name for name, (_, secret) in SECRETS.items() if secret in text]


def test_planted_secrets_reach_neither_jev_nor_the_decision_log_nor_hook_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FaultServer(judge_drops_everything) as server:
        options = {"apiKey": "sk-test-key-that-is-long-enough", "baseUrl": f"{server.url}/v1/systemone"}
        answer = run_hook(event(secret_conversation(), data, options=options), data)
        bodies = [seen.body.decode("utf-8") for seen in server.requests]
    assert answer["action"] in ("replace", "fallback")  # either way the judge was asked
    assert bodies and all(json.loads(body) for body in bodies)  # still valid JSON
    for body in bodies:
        assert leaked(body) == []
        # The redacted state still carries the conversation: only the secrets went.
        assert "set up the deploy." in body and "run " in body

    log_text = (data / "hook.log").read_text(encoding="utf-8")
    assert "goal: " in log_text and "set up the deploy." in log_text  # the prompt is logged, redacted
    assert leaked(log_text) == []
    db_bytes = b"".join(p.read_bytes() for p in data.glob("decisions.sqlite*"))
    assert leaked(db_bytes.decode("utf-8", errors="replace")) == []
    assert len(rows(data)) == 1


# Passwords an output prints, each where the redactor knows it by what stands before it (a name,
# a flag, userinfo), and each shaped like a digest term (a digit inside), so a term list cut out
# of its context would carry it.
OUTPUT_PASSWORDS: dict[str, tuple[str, str]] = {
    "url userinfo": ("cloning https://deploy:Tr0ub4dor3x@git.example.com/app.git", "Tr0ub4dor3x"),
    "env assignment": ("DB_PASSWORD=Zq7mPassw0rd", "Zq7mPassw0rd"),
    "export quoted": ('export API_TOKEN="Qu0tedT0ken9"', "Qu0tedT0ken9"),
    "flag value": ("mysqldump --password Fl4gValue77 app", "Fl4gValue77"),
    "flag equals": ("deploy --secret=Eq5ecretVal", "Eq5ecretVal"),
    "yaml": ("  password: Yam1Passw0rd", "Yam1Passw0rd"),
    "json": ('{"client_secret": "Js0nSecret42"}', "Js0nSecret42"),
}


# The last lines of a private key whose BEGIN line lies far before a digest's closing characters.
KEY_BODY = "\n".join(base64.b64encode(bytes(range(n, n + 48))).decode() for n in range(0, 200, 20))


def password_output(index: int) -> str:
    """An output the budget policy cuts: the passwords repeated at its opening (the digest's terms
    are its most repeated names), plain words after, and at its very end either a password whose
    name lies just outside the closing characters a digest keeps, or a private key's last lines."""
    opening = "\n".join(line for line, _ in OUTPUT_PASSWORDS.values()) + "\n"
    if index % 2:
        last = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----"
    else:
        last = f"DB_PASSWORD=Ta1lPassw0rd{index} " + "z" * 103
    return opening * 4 + "output line\n" * 600 + last


def test_passwords_in_outputs_reach_no_digest_the_judge_is_sent(tmp_path: Path) -> None:
    data = tmp_path / "data"
    messages: list[dict[str, Any]] = [{"role": "user", "text": "check the deploy", "toolUses": [], "handle": "h-0"}]
    for index in range(6):  # the first three are not pinned: the judge is asked about them
        messages += _bash(index, f"cat logs/app-{index}.log", password_output(index))
    messages.append({"role": "assistant", "text": "Done.", "toolUses": [], "handle": "h-end"})
    with FaultServer(judge_drops_everything) as server:
        options = {"apiKey": "sk-test-key-that-is-long-enough", "baseUrl": server.url}
        run_hook(event(messages, data, options=options), data)
        sent = "".join(seen.body.decode("utf-8") for seen in server.requests)
    assert "[terms: " in sent  # the digests were sent
    passwords = [secret for _, secret in OUTPUT_PASSWORDS.values()] + ["Ta1lPassw0rd0", "Ta1lPassw0rd2"]
    assert [p for p in passwords if p in sent] == []
    key_pieces = [line[i : i + 8] for line in KEY_BODY.splitlines() for i in range(0, 64, 8)]
    assert [piece for piece in key_pieces if piece in sent] == []


def test_planted_secrets_in_tool_inputs_reach_neither_log_nor_log_json_nor_the_html_report(tmp_path: Path) -> None:
    data = tmp_path / "data"
    answer = run_hook(event(secret_conversation(), data), data)
    assert answer["action"] == "replace"
    page = tmp_path / "report.html"
    shown = ""
    for argv in (["log", "-n", "0"], ["log", "-n", "0", "--json"], ["report", "all", "--html", str(page)]):
        proc = subprocess.run(
            [sys.executable, "-m", "fast_jev_compaction.cli", *argv, "--db", str(data / "decisions.sqlite")],
            capture_output=True, text=True, timeout=SAFETY_TIMEOUT,
        )
        assert (proc.returncode, proc.stderr) == (0, "")
        shown += proc.stdout
    shown += page.read_text(encoding="utf-8")
    assert "run " in shown  # the inputs are shown, only their secrets went
    assert leaked(shown) == []


def test_a_secret_echoed_by_a_failing_jev_stays_out_of_the_reason_log_and_row(tmp_path: Path) -> None:
    data = tmp_path / "data"
    aws = SECRETS["aws access key"][1]
    with FaultServer([Reply(status=418, body=f"teapot refuses key {aws} and password=hunter2")]) as server:
        options = {"apiKey": "sk-test-key-that-is-long-enough", "baseUrl": server.url}
        answer = run_hook(event(tool_heavy_conversation(), data, options=options), data)
    assert answer["action"] == "fallback" and "418" in answer["reason"]
    everything = json.dumps(answer) + (data / "hook.log").read_text() + json.dumps(rows(data))
    assert aws not in everything and "hunter2" not in everything


# --------------------------------------------------------------------------- private files


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_everything_the_hook_creates_is_private(tmp_path: Path) -> None:
    data = tmp_path / "plugin" / "data"  # neither folder exists yet
    answer = run_hook(event(tool_heavy_conversation(), data), data)
    assert answer["action"] == "replace"
    archived = list((data / "archive").rglob("*"))
    assert any(p.is_file() for p in archived)
    for folder in [data.parent, data, *[p for p in archived if p.is_dir()], data / "archive"]:
        assert mode(folder) == 0o700, folder
    for file in [data / "hook.log", *data.glob("decisions.sqlite*"), *[p for p in archived if p.is_file()]]:
        assert mode(file) == 0o600, file


def _unusable_data(tmp_path: Path) -> Path:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    return blocker


def test_the_temp_log_folder_is_per_user_and_private(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    answer = run_hook(b"garbage", _unusable_data(tmp_path), TMPDIR=str(temp))
    assert answer["action"] == "fallback"
    folder = temp / f"fast-jev-compaction-{os.getuid()}"
    assert mode(folder) == 0o700 and mode(folder / "hook.log") == 0o600
    assert "the hook input is not valid JSON" in (folder / "hook.log").read_text()


@pytest.mark.parametrize("planted", ["symlink", "open folder"])
def test_a_planted_temp_log_folder_is_refused(tmp_path: Path, planted: str) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    folder = temp / f"fast-jev-compaction-{os.getuid()}"
    if planted == "symlink":
        folder.symlink_to(elsewhere)
        target = elsewhere
    else:
        folder.mkdir()
        folder.chmod(0o777)
        target = folder
    answer = run_hook(b"garbage", _unusable_data(tmp_path), TMPDIR=str(temp))
    assert answer["action"] == "fallback"  # still one answer
    assert not (target / "hook.log").exists()


# --------------------------------------------------------------------------- deadline


def many_calls(count: int, lines: int = 40) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "text": "go through every file", "toolUses": [], "handle": "h-0"}]
    for index in range(count):
        messages += _bash(index, f"cat file_{index}.txt", f"contents of file {index}\n" * lines)
    messages.append({"role": "assistant", "text": "All read.", "toolUses": [], "handle": "h-end"})
    return messages


def test_a_slow_judge_over_many_batches_falls_back_before_the_timeout_with_a_row(tmp_path: Path) -> None:
    data = tmp_path / "data"
    timeout_s = 6

    def reply(seen: Seen) -> Reply:
        return Reply(delay_s=1.0, body=answers_body(list(seen.json()["questions"]), 0.05))

    with FaultServer(reply) as server:
        options = {
            "apiKey": "sk-test-key-that-is-long-enough",
            "baseUrl": server.url,
            "timeoutSeconds": timeout_s,
            "maxConcurrentRequests": 1,
            # Requests with room for a few calls each: the judge needs more round trips than fit.
            "maxStateTokens": 3000,
            "maxRequestTokens": 3100,
        }
        # Outputs the budget policy could cut (8,000 chars), so every one is asked about.
        # The mod's own kill: the process must have answered before timeoutSeconds.
        answer = run_hook(event(many_calls(30, lines=400), data, options=options), data, timeout=timeout_s)
        asked = len(server.requests)
    assert answer["action"] == "fallback"
    assert answer["reason"].startswith("out of time after ") and "timeoutSeconds 6" in answer["reason"]
    assert 2 <= asked < 27  # several batches were asked, the rest were never sent
    [row] = rows(data)
    assert (row["outcome"], row["session_id"]) == ("fallback", "session-1")
    assert row["reason"].startswith("out of time after ")
    assert "INFO fallback session=session-1" in (data / "hook.log").read_text()


def test_a_compaction_that_never_yields_is_answered_by_the_last_resort(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # The host writes all of a 3 MB event but its last characters and then nothing, keeping the
    # pipe open: reading it blocks, with no await where the compaction deadline could stop it,
    # for as long as the test holds the pipe, whatever the machine's speed. (The options arrive
    # in the reader's first window, over a megabyte: the event's own timeoutSeconds counts.)
    text = json.dumps(event(many_calls(1000), data, options={"timeoutSeconds": 3}))
    proc = subprocess.Popen(
        [sys.executable, "-I", str(HOOK)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=hook_env(data, FAST_JEV_STDIN_IDLE_SECONDS=str(SAFETY_TIMEOUT)),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # On a slow machine the answer may come while the rest is still being written.
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(text[:-100].encode())
            proc.stdin.flush()
        # The watchdog answers at timeoutSeconds less its margin; the stalled writer never ends
        # the read before the test closes the pipe.
        line = proc.stdout.readline()
    finally:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        proc.wait(timeout=SAFETY_TIMEOUT)
    assert (proc.returncode, proc.stderr.read() if proc.stderr else b"") == (0, b"")
    answer = json.loads(line)
    assert answer["action"] == "fallback" and answer["reason"].startswith("out of time after ")
    assert "(timeoutSeconds 3)" in answer["reason"]
    [row] = rows(data)
    assert row["outcome"] == "fallback" and row["reason"].startswith("out of time after ")
    assert "the compaction was still running" in (data / "hook.log").read_text()


@pytest.mark.parametrize("where", ["options", "a tool input", "the whole event"])
def test_parse_event_reports_a_100000_deep_event_as_bad_input(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps(event(tool_heavy_conversation(), data))
    if where == "options":
        text = text.replace('"options": {}', f'"options": {{"x": {deep}}}')
    elif where == "a tool input":
        text = text.replace('"input": {"command": "seq 1 3000"', f'"input": {{"deep": {deep}, "command": "seq 1 3000"')
    else:
        text = deep
    assert deep in text
    answer = run_hook(text.encode(), data)
    assert answer["action"] == "fallback"
    assert answer["reason"].startswith("the hook input is not a session.compact event (") and "nests" in answer["reason"]
    assert "internal error" not in answer["reason"] and "RecursionError" not in answer["reason"]
    if where != "the whole event":  # else the data folder is never named
        [row] = rows(data)
        assert row["fallback_reason"] == "bad-input"


# --------------------------------------------------------------------------- unicode


def test_a_lone_surrogate_in_kept_history_still_replaces(tmp_path: Path) -> None:
    data = tmp_path / "data"
    messages = tool_heavy_conversation()
    messages[1]["text"] = "cut mid-emoji \ud83d"  # a kept prose message
    messages[3]["toolResults"][0]["text"] += "\udc80 tail"  # a cut result, archived
    answer = run_hook(event(messages, data), data)
    assert answer["action"] == "replace", answer.get("reason")
    texts = [m.get("text") for m in answer["messages"]]
    assert "cut mid-emoji \ud83d" in texts  # escaped on the wire, the same string once parsed
    assert "internal error" not in (data / "hook.log").read_text()
    assert rows(data)[-1]["outcome"] == "replaced"


@pytest.mark.parametrize("plugin_data", ["/tmp/x\x00y", "/tmp/x\ud800y"])
def test_a_nul_or_surrogate_in_plugin_data_still_answers(tmp_path: Path, plugin_data: str) -> None:
    doc = event(tool_heavy_conversation(), tmp_path, pluginData=plugin_data)
    answer = run_hook(doc, tmp_path / "env-data", TMPDIR=str(tmp_path))
    assert answer["action"] == "replace"


def test_nuls_and_surrogates_in_ids_are_escaped_in_the_row(tmp_path: Path) -> None:
    data = tmp_path / "data"
    messages = tool_heavy_conversation()
    odd = "toolu_\x00\ud800"
    messages[2]["toolUses"][0]["tool_use_id"] = odd
    messages[3]["toolResults"][0]["tool_use_id"] = odd
    answer = run_hook(event(messages, data, sessionId="s\x00\udfff", agentId="a\ud800"), data)
    assert answer["action"] == "replace"
    with sqlite3.connect(data / "decisions.sqlite") as db:
        [(session, agent)] = db.execute("SELECT session_id, agent_id FROM compactions").fetchall()
        ids = [r[0] for r in db.execute("SELECT tool_use_id FROM decisions")]
    assert (session, agent) == ("s\\x00\\udfff", "a\\ud800")
    assert "toolu_\\x00\\ud800" in ids
    assert all(p.resolve().is_relative_to((data / "archive").resolve()) for p in (data / "archive").rglob("*"))


# --------------------------------------------------------------------------- Jev response size


def test_a_huge_2xx_jev_body_is_refused_not_read_whole() -> None:
    import asyncio

    from fast_jev_compaction.errors import JevResponseError
    from fast_jev_compaction.jev.client import JevClient

    huge = b'{"answers": {}, "padding": "' + b"x" * (6 * 1024 * 1024) + b'"}'

    async def ask(url: str) -> None:
        async with JevClient(api_key="sk-test-key-that-is-long-enough", base_url=url, retries=0, max_response_bytes=1 << 20) as client:
            await client.ask({"goal": "g"}, {"call_t1": {"type": "noul", "question": "q"}})

    with FaultServer([Reply(body=huge)]) as server:
        with pytest.raises(JevResponseError, match="larger than 1024 KiB"):
            asyncio.run(ask(server.url))
        assert len(server.requests) == 1  # a response error is never retried


def test_a_relative_plugin_data_never_writes_into_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    data = tmp_path / "data"
    answer = run_hook(event(tool_heavy_conversation(), data, pluginData="relative/data"), data, cwd=project)
    assert answer["action"] == "replace"
    assert list(project.iterdir()) == []
    assert (data / "hook.log").exists()  # CLAUDE_PLUGIN_DATA, the absolute one, is used instead


def test_a_decision_log_locked_past_the_deadline_still_gets_the_answer_out_in_time(tmp_path: Path) -> None:
    from fast_jev_compaction.audit.store import DecisionLog

    data = tmp_path / "data"
    data.mkdir()
    DecisionLog(data / "decisions.sqlite").close()
    holder = sqlite3.connect(data / "decisions.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # held longer than the row's whole budget
    try:
        # The row's own budget (4.5 s of retries) outlasts this deadline (answer by 5 s).
        answer = run_hook(event(tool_heavy_conversation(), data, options={"timeoutSeconds": 6}), data, timeout=6)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert answer["action"] == "replace"  # the compaction's own answer, not a fallback
