"""The CLI as a new user meets it: explicit judge choice, one-line errors with documented exit
codes, output that is safe and scriptable, a bounded audit, and progress only on a terminal.

Every case runs the real ``fast-jev`` in a subprocess, in an isolated HOME with no judge key,
against real servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from fast_jev_compaction.audit.store import DecisionLog
from fast_jev_compaction.conversation.transcript import read_messages
from fast_jev_compaction.evaluation.synthetic import transcript_lines
from fast_jev_compaction.state.goal import compaction_goal, goal_from_messages
from jev_fault_server import FaultServer, Reply, Seen, answers_body

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "session.jsonl"
GUARD_S = 120  # a guard against a hung process, not a speed requirement


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("CLAUDE", "FAST_JEV", "TYPESAFE", "OPENROUTER", "CLOUDFLARE"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(HOME=str(home), **extra)
    return env


def fast_jev(home: Path, *argv: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", *argv],
        capture_output=True, text=True, env=env or clean_env(home), input=stdin, timeout=GUARD_S, cwd=home,
    )


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def answering(seen: Seen) -> Reply:
    return Reply(body=answers_body(list(seen.json()["questions"]), 0.2))


class Listener:
    """A TCP listener that records every connection and what it said first, and answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.seen: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.seen.append(conn.recv(4096))
                except OSError:
                    self.seen.append(b"")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture()
def listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()


# --------------------------------------------------------------------------- judge selection


def test_a_provider_key_for_another_tool_selects_nothing_and_sends_nothing(
    home: Path, tmp_path: Path, listener: Listener
) -> None:
    # Every request httpx could make goes through the listener: it must hear nothing.
    proxy = {name: listener.url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")}
    env = clean_env(home, OPENROUTER_API_KEY="sk-or-v1-for-another-tool", CLOUDFLARE_API_TOKEN="cf", **proxy)
    proc = fast_jev(home, "compact", str(EXAMPLE), "-o", str(tmp_path / "out.json"), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["judge"] == "local"
    assert listener.seen == []

    # The control: chosen explicitly, OpenRouter is used, so the capture does work.
    chosen = fast_jev(home, "compact", str(EXAMPLE), "--provider", "openrouter", "--timeout", "5", env=env)
    assert chosen.returncode == 1
    assert any(b"openrouter.ai" in first for first in listener.seen)


def test_serve_prints_the_exact_jev_url_and_a_loopback_endpoint_needs_no_key(home: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "fast_jev_compaction.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(home),
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url = line.rsplit("--jev-url ", 1)[1].strip()
        assert url.endswith("/v1/systemone")
        proc = fast_jev(home, "compact", str(EXAMPLE), "--jev-url", url, "--json", "-o", str(home / "o.json"))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["judge"] == "jev"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=GUARD_S)


def test_a_key_over_plain_http_to_another_host_is_refused(home: Path) -> None:
    proc = fast_jev(home, "compact", str(EXAMPLE), "--api-key", "sk-secret", "--jev-url", "http://192.0.2.1/v1/systemone")
    assert proc.returncode == 1
    assert proc.stderr == (
        "fast-jev compact: refusing to send the Jev key over plain http to 192.0.2.1; "
        "use an https URL in --jev-url, or a loopback one; nothing was written\n"
    )
    assert proc.stdout == ""


def test_cli_and_hook_share_the_goal_rule_instructions_included(home: Path) -> None:
    with FaultServer(answering) as server:
        proc = fast_jev(home, "compact", str(EXAMPLE), "--jev-url", f"{server.url}/v1/systemone",
                        "--instructions", "the totals bug", "-o", str(home / "o.json"))
        assert proc.returncode == 0, proc.stderr
        goal = server.requests[0].json()["state"]["goal"]
    messages = read_messages(EXAMPLE)
    assert goal == compaction_goal(messages, "", "the totals bug")
    last_prompts = goal_from_messages(messages)
    assert last_prompts and goal.startswith(last_prompts)
    assert goal.endswith("Focus for this compaction: the totals bug")


# --------------------------------------------------------------------------- errors and exit codes


def duplicate_ids() -> str:
    use = {"tool_use_id": "toolu_1", "tool": "Read", "input": {"file_path": "a"}}
    result = {"tool_use_id": "toolu_1", "text": "x"}
    return json.dumps([
        {"role": "user", "text": "go"},
        {"role": "assistant", "toolUses": [use]},
        {"role": "user", "toolResults": [result]},
        {"role": "assistant", "toolUses": [use]},
        {"role": "user", "toolResults": [result]},
        {"role": "assistant", "text": "done"},
    ])


@pytest.mark.parametrize(
    ("argv", "stdin", "stderr"),
    [
        (["compact", "-", "--preserve-recent", "0"], duplicate_ids(), "fast-jev compact: Duplicate tool_use_id: toolu_1; "),
        (["compact", str(EXAMPLE), "--keep-threshold", "nan"], None,
         "fast-jev compact: argument --keep-threshold: expected a finite number, got nan (see fast-jev compact --help)\n"),
        (["compact", str(EXAMPLE), "--preserve-recent", "-1"], None,
         "fast-jev compact: argument --preserve-recent: expected a number >= 0, got -1 (see fast-jev compact --help)\n"),
        (["compact", str(EXAMPLE), "--max-concurrent-requests", "2.5"], None,
         "fast-jev compact: argument --max-concurrent-requests: expected a whole number, got '2.5' (see fast-jev compact --help)\n"),
        (["compact", str(EXAMPLE), "--timeout", "0"], None,
         "fast-jev compact: argument --timeout: expected a number in [0.1, 300], got 0 (see fast-jev compact --help)\n"),
        (["bench", "/nope"], None, "fast-jev bench: no such file or folder: /nope\n"),
        (["serve", "--port", "99999"], None,
         "fast-jev serve: argument --port: expected a port in 0-65535, got 99999 (see fast-jev serve --help)\n"),
        (["log", "-n", "-1"], None,
         "fast-jev log: argument -n/--last: expected 0 (everything) or more, got -1 (see fast-jev log --help)\n"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(home: Path, argv: list[str], stdin: str | None, stderr: str) -> None:
    proc = fast_jev(home, *argv, stdin=stdin)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(stderr)
    assert proc.stdout == ""


def test_output_onto_the_input_is_refused_and_the_input_is_untouched(home: Path) -> None:
    transcript = home / "session.jsonl"
    transcript.write_bytes(EXAMPLE.read_bytes())
    (home / "sub").mkdir()
    for out in (str(transcript), "sub/../session.jsonl"):
        proc = fast_jev(home, "compact", str(transcript), "-o", out)
        assert proc.returncode == 2
        assert proc.stderr == f"fast-jev compact: refusing to write onto the input {transcript}; give --out another file\n"
    assert transcript.read_bytes() == EXAMPLE.read_bytes()


def test_ctrl_c_exits_130_with_one_line(home: Path) -> None:
    # A judge that never answers keeps the compaction waiting until SIGINT arrives. One request
    # at a time: once the server holds it, the process has nothing else to do but wait for it,
    # so the signal always finds it in that same place (with four, it could land while the
    # others were still being built or sent).
    with FaultServer([Reply(delay_s=GUARD_S)]) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(EXAMPLE),
             "--jev-url", f"{server.url}/v1/systemone", "--timeout", "300", "--max-concurrent-requests", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(home), cwd=home,
        )
        deadline = time.monotonic() + GUARD_S
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, "the judge was never asked"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 130
    assert err.strip() == "fast-jev compact: interrupted"
    assert out == ""


def test_version(home: Path) -> None:
    from importlib.metadata import version

    proc = fast_jev(home, "--version")
    assert (proc.returncode, proc.stdout) == (0, f"fast-jev {version('fast-jev-compaction')}\n")


# --------------------------------------------------------------------------- output


def test_json_summary_for_scripts(home: Path) -> None:
    proc = fast_jev(home, "compact", str(EXAMPLE), "-o", str(home / "o.json"), "--json")
    doc = json.loads(proc.stdout)
    assert doc["judge"] == "local" and doc["out"] == str(home / "o.json")
    assert (doc["keep"], doc["truncate"], doc["drop"], doc["pinned"]) == (6, 3, 1, 2)
    assert doc["summary"].startswith(f"{doc['reduction'] * 100:.1f}% reduction; 6 kept, 3 truncated, 1 dropped, 2 pinned (3 by rules);")
    assert doc["archive"] == str(home / "o.json.archive")
    assert 0 < doc["reduction"] < 1


def test_transcript_format_chains_every_record_and_keeps_tool_pairs_together(home: Path) -> None:
    import uuid

    session = str(uuid.uuid4())
    out = home / f"{session}.jsonl"
    archive = str(home / "archive")
    proc = fast_jev(home, "compact", str(EXAMPLE), "--format", "transcript", "-o", str(out), "--archive", archive)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {r["sessionId"] for r in records} == {session}
    assert [r["parentUuid"] for r in records] == [None, *(r["uuid"] for r in records[:-1])]
    for index, record in enumerate(records):
        content = record["message"]["content"]
        if record["type"] == "assistant":
            assert record["message"]["usage"]["input_tokens"] == record["message"]["usage"]["output_tokens"] == 0
            uses = [b["id"] for b in content if b["type"] == "tool_use"]
            if uses:
                following = records[index + 1]["message"]["content"]
                assert [b["tool_use_id"] for b in following if b.get("type") == "tool_result"] == uses
    # read back, it is the same conversation the json format gives
    again = read_messages(out)
    plain = json.loads(fast_jev(home, "compact", str(EXAMPLE), "--archive", archive).stdout)
    assert [m.text for m in again] == [m["text"] if "text" in m else "" for m in plain]


# --------------------------------------------------------------------------- audit


def test_cli_compactions_are_logged_with_log_and_log_is_bounded(home: Path) -> None:
    db = home / "log.sqlite"
    env = clean_env(home, FAST_JEV_DB=str(db))
    for _ in range(4):
        proc = fast_jev(home, "compact", str(EXAMPLE), "-o", str(home / "o.json"), "--log", env=env)
        assert proc.returncode == 0 and f"in {db}" in proc.stderr
    assert fast_jev(home, "log", "path", env=env).stdout == f"{db}\n"
    shown = fast_jev(home, "log", env=env).stdout
    assert [line.split()[0] for line in shown.splitlines() if line.startswith("#")] == ["#2", "#3", "#4"]
    assert "trigger cli" in shown and "truncate" in shown
    assert len(json.loads(fast_jev(home, "log", "-n", "0", "--json", env=env).stdout)["compactions"]) == 4
    with DecisionLog(db, create=False) as log:
        t3 = next(d for d in log.decisions_for(4) if d.call_id == "t3")
    for ref in ("t3", t3.tool_use_id):
        why = fast_jev(home, "log", "--why", ref, "-n", "0", env=env)
        assert why.stdout.startswith(f"{t3.tool_use_id}: 4 decisions, newest first"), ref
    ambiguous = fast_jev(home, "log", "--why", "toolu_", env=env)
    assert ambiguous.returncode == 2 and "tool calls start with 'toolu_'" in ambiguous.stderr


def test_an_empty_log_says_where_it_looked_and_how_to_fill_it(home: Path) -> None:
    proc = fast_jev(home, "log")
    assert proc.returncode == 0
    assert f"there is no decision log at {home}/.claude/plugins/data/" in proc.stdout
    assert "`fast-jev compact --log`" in proc.stdout
    assert not (home / ".claude").exists()


SLASH_COMMANDS = ("fast-jev-log", "fast-jev-stats")


def slash_command(command: str) -> tuple[dict[str, str], str]:
    """A slash command's frontmatter and the shell block it runs."""
    source = (REPO / "commands" / f"{command}.md").read_text(encoding="utf-8")
    _, front, body = source.split("---\n", 2)
    fields = dict(line.split(": ", 1) for line in front.splitlines())
    return fields, body.split("```!\n", 1)[1].split("\n```", 1)[0]


def run_slash_command(
    command: str, arguments: str, home: Path, data: Path, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    """The shell block as Claude Code runs it: the plugin's folders and the user's arguments
    pasted into its text, then the whole run by bash."""
    _, block = slash_command(command)
    text = block.replace("${CLAUDE_PLUGIN_ROOT}", str(REPO)).replace("${CLAUDE_PLUGIN_DATA}", str(data))
    return subprocess.run(
        ["bash", "-c", text.replace("$ARGUMENTS", arguments)], capture_output=True, text=True, timeout=GUARD_S,
        cwd=home, env=clean_env(home, FAST_JEV_PYTHON=python),
    )


@pytest.mark.parametrize(("command", "arguments"), [("fast-jev-log", "-n 0"), ("fast-jev-stats", "")])
def test_the_slash_commands_are_bounded_whatever_the_arguments(home: Path, command: str, arguments: str) -> None:
    data = home / "data"
    data.mkdir()
    env = clean_env(home, FAST_JEV_DB=str(data / "decisions.sqlite"))
    for _ in range(12):
        fast_jev(home, "compact", str(EXAMPLE), "-o", str(home / "o.json"), "--log", env=env)
    lines = run_slash_command(command, arguments, home, data).stdout.splitlines()
    assert 1 < len(lines) <= 151
    if command == "fast-jev-log":
        assert lines[-1].startswith("… ") and lines[-1].endswith("more lines; run `fast-jev log` in a shell to see them")
    # Options of the user's that lift the bound lose to the command's own.
    lines = run_slash_command(command, f"{arguments} --max-lines 0", home, data).stdout.splitlines()
    assert 1 < len(lines) <= 151 if command == "fast-jev-log" else lines[0].startswith("fast-jev: ")


HOSTILE_ARGUMENTS = [
    "$(touch pwned)",
    "`touch pwned`",
    "-n 1; touch pwned",
    "-n 1 && touch pwned",
    "| touch pwned",
    "' ; touch pwned ; '",
    '" ; touch pwned ; "',
    "-n 1\ntouch pwned",
    "--session $(touch pwned)",
]


@pytest.mark.parametrize("command", SLASH_COMMANDS)
@pytest.mark.parametrize("arguments", HOSTILE_ARGUMENTS)
def test_the_slash_commands_run_nothing_their_arguments_hold(home: Path, command: str, arguments: str) -> None:
    data = home / "data"
    data.mkdir()
    proc = run_slash_command(command, arguments, home, data)
    assert not (home / "pwned").exists()
    # Either the arguments were read as fast-jev's own options (an empty log), or refused as such.
    assert proc.stdout.startswith(("No compactions recorded yet", "fast-jev: ", "fast-jev log: ", "───")), proc.stdout


@pytest.mark.parametrize("command", SLASH_COMMANDS)
def test_slash_command_sh_refuses_a_relative_fast_jev_python(home: Path, command: str) -> None:
    data = home / "data"
    data.mkdir()
    planted = home / "venv" / "bin" / "python"  # in the session's folder: anyone's file
    planted.parent.mkdir(parents=True)
    planted.write_text(f"#!/bin/sh\ntouch {home / 'pwned'}\n")
    planted.chmod(0o755)
    proc = run_slash_command(command, "", home, data, python="venv/bin/python")
    assert not (home / "pwned").exists()
    assert proc.stdout == (
        "FAST_JEV_PYTHON is a relative path (venv/bin/python); give an absolute path or a command name on PATH\n"
    )
    # A command name is looked up on PATH, never in the session's folder.
    assert "relative path" not in run_slash_command(command, "", home, data, python="python3").stdout


@pytest.mark.parametrize("command", SLASH_COMMANDS)
def test_the_slash_commands_allow_only_their_runner_and_only_the_user_runs_them(command: str) -> None:
    fields, block = slash_command(command)
    assert fields["disable-model-invocation"] == "true"
    allowed = fields["allowed-tools"]
    assert re.fullmatch(r"Bash\(([^*]+):\*\)", allowed)
    # The one command the block runs starts with what the rule allows; its arguments go in a
    # quoted here-document, which no shell expands.
    assert block.startswith(allowed[len("Bash(") : -len(":*)")] + " ")
    assert block.splitlines()[1:] == ["$ARGUMENTS", "FAST_JEV_ARGUMENTS"]
    assert block.splitlines()[0].endswith(" <<'FAST_JEV_ARGUMENTS'")


# --------------------------------------------------------------------------- progress


def run_on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal; returns the exit code and what the terminal showed."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=secondary, env=env)
    os.close(secondary)
    shown = b""
    while True:
        ready, _, _ = select.select([primary], [], [], GUARD_S)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    return proc.wait(timeout=GUARD_S), shown.decode("utf-8", errors="replace")


def test_retries_and_waits_are_reported_on_a_terminal_and_silent_when_piped(home: Path) -> None:
    def script(seen: Seen) -> Reply:
        # Two 429s, each after a wait long enough for the progress line to draw.
        if len(server.requests) <= 2:
            return Reply(status=429, body="slow down", delay_s=1.2)
        return answering(seen)

    with FaultServer(script) as server:
        argv = [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(EXAMPLE),
                "--jev-url", f"{server.url}/v1/systemone", "-o", str(home / "o.json")]
        code, shown = run_on_a_terminal(argv, clean_env(home))
        assert code == 0
        assert "retrying after 429 (1/2)…" in shown and "retrying after 429 (2/2)…" in shown
        assert "asking the judge: 0 answered, 1 waiting" in shown

        server.requests.clear()
        piped = subprocess.run(argv, capture_output=True, text=True, env=clean_env(home), timeout=GUARD_S)
    assert piped.returncode == 0
    assert piped.stderr == ""


def test_bench_shows_progress_on_a_terminal(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    # Sessions of a few thousand messages: each one's runs take well over the half second after
    # which the line is drawn, however fast the core gets (the example session no longer does).
    session = "\n".join(transcript_lines(3000)) + "\n"
    for n in range(3):
        (folder / f"s{n}.jsonl").write_text(session, encoding="utf-8")
    (folder / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    argv = [sys.executable, "-m", "fast_jev_compaction.cli", "bench", str(folder), "--repeat", "3"]
    code, shown = run_on_a_terminal(argv, clean_env(home))
    assert code == 0
    assert re.search(r"bench: [1-4]/4 (broken|s[0-2])\.jsonl", shown), shown
    # one bad transcript costs its own row only
    piped = fast_jev(home, "bench", str(folder), "--repeat", "1")
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout.count(" calls  ") == 3 and "skipped" in piped.stdout and "broken.jsonl:1" in piped.stdout


def test_eval_shows_progress_on_a_terminal_and_is_silent_when_piped(home: Path) -> None:
    from fast_jev_compaction.evaluation.corpus import default_corpus

    corpus = default_corpus()
    if not corpus.is_dir():
        pytest.skip(f"the corpus is not at {corpus}: an evaluation long enough to draw progress needs it")
    argv = [sys.executable, "-m", "fast_jev_compaction.cli", "eval", str(corpus)]
    code, shown = run_on_a_terminal(argv, clean_env(home))
    assert code == 0
    assert re.search(r"eval: session \d+/\d+", shown), shown[-500:]
    piped = fast_jev(home, "eval", str(corpus))
    assert piped.returncode == 0 and piped.stderr == ""


def test_ctrl_c_during_bench_exits_130_with_one_line(home: Path) -> None:
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fast_jev_compaction.cli", "bench", str(EXAMPLE), "--repeat", "100000"],
        stdout=subprocess.DEVNULL, stderr=secondary, env=clean_env(home),
    )
    os.close(secondary)
    shown = b""
    while b"bench: 1/1" not in shown:  # the work has started
        ready, _, _ = select.select([primary], [], [], GUARD_S)
        assert ready, shown
        shown += os.read(primary, 4096)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=GUARD_S) == 130
    # Everything the process wrote is in the terminal's buffer now: read it to the end.
    try:
        while select.select([primary], [], [], GUARD_S)[0]:
            chunk = os.read(primary, 4096)
            if not chunk:
                break
            shown += chunk
    except OSError:  # the terminal is closed once it is drained
        pass
    os.close(primary)
    # However many times the line was redrawn before the signal (each redraw opens with a clear),
    # the last clear is the one that ends it, and one line after it says what happened.
    drawn, _, after = shown.decode().rpartition("\r\x1b[2K")
    assert "bench: 1/1" in drawn
    assert [line for line in after.replace("\r", "\n").split("\n") if line.strip()] == ["fast-jev bench: interrupted"]


def test_a_bug_is_one_line_unless_debugging(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from fast_jev_compaction import cli
    from fast_jev_compaction.commands import bench

    def broken(_args: Any) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(bench, "run", broken)
    monkeypatch.delenv("FAST_JEV_DEBUG", raising=False)
    assert cli.main(["bench", str(EXAMPLE)]) == 1
    assert capsys.readouterr().err == (
        "fast-jev bench: internal error (RuntimeError: boom); set FAST_JEV_DEBUG=1 to see the traceback, "
        "and please report it\n"
    )
    monkeypatch.setenv("FAST_JEV_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["bench", str(EXAMPLE)])


def test_compact_archive_markers_name_real_files_under_a_locale_that_is_not_utf8(home: Path) -> None:
    """Under a locale whose file names are not UTF-8 (here C without coercion: ASCII, as
    ISO-8859-1 would be), a non-ASCII --archive folder's markers named other bytes than the files."""
    archive = home / "archivé-ü"
    out = home / "o.json"
    env = {**clean_env(home), "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(EXAMPLE), "-o", str(out), "--archive", str(archive)],
        capture_output=True, env=env, timeout=GUARD_S, cwd=home,
    )
    assert proc.returncode == 0, proc.stderr
    paths = re.findall(r"saved at (\S+?);", out.read_text(encoding="utf-8"))
    assert paths and all(Path(path).parent == archive and Path(path).is_file() for path in paths)
