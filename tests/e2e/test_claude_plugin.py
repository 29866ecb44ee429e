"""The plugin inside the real Claude Code 2.1.332, against the scripted fake Messages API.

Each case asserts what a user would see (stream-json toasts, the transcript on disk, what the
model is sent next) and what the plugin records (decision-log rows, hook.log).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from claude_harness import RUN_TIMEOUT, Claude, Tui, isolated_env, wait_for
from fake_anthropic import FINAL_TEXT, conversation
from fast_jev_compaction.compaction import shape_of
from fast_jev_compaction.decide.archive import archive_name
from fast_jev_compaction.decide.markers import is_lead_note, saved_path
from fast_jev_compaction.decide.rebuild import cut_output
from fast_jev_compaction.options import CompactOptions

pytestmark = pytest.mark.e2e

PREPARING = "fast-jev-compaction is preparing its Python environment; this compaction uses the built-in summary"
# Text the engine adds to user turns; it is not conversation content.
INJECTED = ("<system-reminder>", "<local-command-caveat>", "<command-name>", "<local-command-stdout>", "<command-message>")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def items(body: dict[str, Any]) -> list[tuple[str, ...]]:
    """A request's conversation as comparable items, without the engine's injected text."""
    out: list[tuple[str, ...]] = []
    for message in conversation(body):
        for block in _blocks(message):
            kind = block.get("type")
            if kind == "text":
                text = block.get("text", "")
                if message["role"] == "user" and text.lstrip().startswith(INJECTED):
                    continue
                out.append((f"{message['role']}_text", text))
            elif kind == "tool_use":
                out.append(("tool_use", block["id"], json.dumps(block["input"], sort_keys=True)))
            elif kind == "tool_result":
                out.append(("tool_result", block["tool_use_id"], _result_text(block)))
    return out


def run_and_compact(claude: Claude, prompt: str = "do the thing", command: str = "/compact", **options: Any) -> tuple[str, Any]:
    settings = claude.settings(**options) if options else None
    first = claude.run(prompt, settings=settings)
    assert first.returncode == 0 and first.result["result"] == FINAL_TEXT
    compacted = claude.run(command, resume=first.session_id, settings=settings)
    assert compacted.returncode == 0, compacted.stderr[-2000:]
    return first.session_id, compacted


# --------------------------------------------------------------------------- static checks


def test_validate_strict_json_lists_the_mod_events(claude_bin: Path, plugin_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(claude_bin), "plugin", "validate", "--strict", "--json", str(plugin_dir)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, env=isolated_env(tmp_path), cwd=tmp_path,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["success"] is True and report["strict"] is True
    modules = [m for c in report["contents"] if c["type"] == "hooks" for m in c.get("modules", [])]
    assert [(m["module"], m["uses"]["events"]) for m in modules] == [("./mod.mjs", ["session.compact", "turn.complete"])]
    assert [h["event"] for h in report["provides"]["hooks"]] == ["SessionStart"]


def test_mod_unit_tests_pass_under_claude_plugin_test(claude_bin: Path, plugin_dir: Path, tmp_path: Path) -> None:
    # `claude plugin test` takes the plugin folder (it looks for hooks/hooks.json in it).
    proc = subprocess.run(
        [str(claude_bin), "plugin", "test", str(plugin_dir)], capture_output=True, text=True, timeout=RUN_TIMEOUT,
        env=isolated_env(tmp_path), cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert " 0 fail" in output and "Ran " in output


# --------------------------------------------------------------------------- manual /compact


def test_manual_compact_replaces_the_history_with_the_pruned_verbatim_one(claude: Claude) -> None:
    first = claude.run("do the thing")
    assert first.returncode == 0 and first.result["result"] == FINAL_TEXT
    before = items(claude.api.message_requests()[-1]) + [("assistant_text", FINAL_TEXT)]
    sid = first.session_id

    compacted = claude.run("/compact", resume=sid)
    assert compacted.returncode == 0, compacted.stderr[-2000:]
    [toast] = compacted.toasts()
    assert " tool outputs moved to the archive " in toast and toast.endswith(", no summary")
    assert any(line.startswith("decisions: t1:Bash:") for line in compacted.logs())
    [boundary] = compacted.boundaries()
    assert boundary["trigger"] == "manual" and boundary["post_tokens"] < boundary["pre_tokens"]
    assert claude.api.summarizer_requests() == []

    [(row, decisions)] = claude.decisions()
    assert (row.outcome, row.trigger, row.session_id, row.judge) == ("replaced", "manual", sid, "local")
    assert len(decisions) == 5 and row.freed_chars > 0
    actions = {d.tool_use_id: d.action for d in decisions}
    assert any(a != "keep" for a in actions.values())

    # On disk: the boundary, then the kept records; the truncated results carry the marker.
    records = claude.transcript(sid)
    cut = next(i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary")
    kept = [r for r in records[cut + 1 :] if r.get("type") in ("user", "assistant")]
    kept_results = [
        b for r in kept for b in _blocks(r["message"]) if b.get("type") == "tool_result"
    ]
    assert {b["tool_use_id"] for b in kept_results} == {i for i, a in actions.items() if a != "drop"}
    for block in kept_results:
        marked = "[fast-jev-compaction kept" in _result_text(block)
        assert marked == (actions[block["tool_use_id"]] == "truncate")

    # The next turn sends exactly the pruned history: decisions applied, prose verbatim, a
    # marker line where each dropped call was, and every cut output saved whole where it says.
    follow = claude.run("what now?", resume=sid)
    assert follow.returncode == 0
    sent = items(claude.api.message_requests()[-1])
    assert sent[-1] == ("user_text", "what now?")
    shape = shape_of(CompactOptions())
    expected: list[tuple[str, ...]] = []
    originals = {item[1]: item[2] for item in before if item[0] == "tool_result"}
    for item in before:
        if item[0] in ("tool_use", "tool_result") and actions[item[1]] == "drop":
            continue
        if item[0] == "tool_result" and actions[item[1]] == "truncate":
            saved = claude.data_dir / "archive" / archive_name(item[2])
            assert saved.read_text(encoding="utf-8") == item[2]
            item = (item[0], item[1], cut_output(item[2], False, shape, str(saved)))
        expected.append(item)
    prose = [
        (kind, "\n".join(line for line in text[0].split("\n") if not line.startswith("[fast-jev-compaction: ")), *text[1:])
        if kind == "assistant_text" else (kind, *text)
        for kind, *text in sent[:-1]
    ]
    # The history starts with the one lead line that says what the markers mean (the engine merges
    # it into the first user message, with a line break after it).
    got = [i for i in prose if i != ("assistant_text", "")]
    assert got[0][0] == "user_text" and is_lead_note(got[0][1].rstrip("\n"))
    assert got[1:] == expected
    markers = [line for kind, *text in sent if kind == "assistant_text" for line in text[0].split("\n") if line.startswith("[fast-jev-compaction: ")]
    assert len(markers) == sum(a == "drop" for a in actions.values())
    for marker in markers:
        assert Path(saved_path(marker) or "").read_text(encoding="utf-8") in originals.values()

    # The slash command reads the same decision log through the plugin's environment.
    claude.run("/fast-jev-compaction:fast-jev-log")
    shown = json.dumps(claude.api.message_requests()[-1])
    assert "replaced: " in shown and re.search(r"t1 +Bash", shown)
    claude.run("/fast-jev-compaction:fast-jev-stats")
    assert "compactions: 1 (1 replaced, 0 fallback, 0 skipped)" in json.dumps(claude.api.message_requests()[-1])


def test_the_slash_commands_run_only_their_runner_whatever_the_arguments(claude: Claude) -> None:
    """Outside bypass mode the commands' allowed-tools rule lets their runner through; the user's
    arguments reach fast-jev as data, so what a shell would run in them never runs."""
    pwned = claude.root / "pwned"
    hostile = f"-n 1 $(touch {pwned}) `touch {pwned}`; touch {pwned}"
    for command in ("fast-jev-log", "fast-jev-stats"):
        run = claude.run(f"/fast-jev-compaction:{command} {hostile}", permission_mode="default")
        assert run.returncode == 0 and not pwned.exists()
        # fast-jev read them as its own options and refused them as such, in a one-line usage
        # error: Claude Code shows it (the log's failed run) or hands it to the model (the stats').
        shown = run.result["result"] + json.dumps(claude.api.message_requests()[-1:])
        assert "invalid choice: '$(touch'" in shown or "unrecognized arguments: -n 1 $(touch" in shown, shown[-2000:]
        assert "permission" not in run.result["result"]


@pytest.mark.parametrize("tokens", [1000, 600_000], ids=["under-the-target", "over-the-target"])
def test_compact_with_nothing_to_prune_skips_without_a_summary(claude: Claude, tokens: int) -> None:
    """The seed system ran the lossy summary whenever a pass freed little. /compact asks this
    plugin for a compaction: with nothing left to prune, under the 40 % target or over it (60 %
    of the 1,000,000-token window), the verbatim history stays."""
    claude.api.base_tokens = tokens
    sid, compacted = run_and_compact(claude, "do a small thing")
    assert compacted.toasts() == []
    assert compacted.result["result"].startswith("Not compacted")
    assert claude.api.summarizer_requests() == [] and compacted.boundaries() == []
    [(row, _decisions)] = claude.decisions()
    assert (row.outcome, row.session_id) == ("skipped", sid)
    where = "under" if tokens < 400_000 else "over"
    assert row.reason.startswith("nothing left to prune; context ") and f"{where} the 40% target" in row.reason


def test_with_min_reduction_ratio_set_a_pass_short_of_it_runs_one_built_in_summary(claude: Claude) -> None:
    sid, compacted = run_and_compact(claude, minReductionRatio=0.99)
    [toast] = compacted.toasts()
    assert toast.startswith("fallback to built-in summary (below 99.0% minimum: ")
    assert len(claude.api.summarizer_requests()) == 1
    assert [b["trigger"] for b in compacted.boundaries()] == ["manual"]
    [(row, _decisions)] = claude.decisions()
    assert (row.outcome, row.session_id, row.fallback_reason) == ("fallback", sid, "below-ratio")


@pytest.mark.parametrize(
    ("script", "options", "reason"),
    [
        ("echo 'boom' >&2\nexit 3\n", {}, "the Python hook exited with code 3"),
        ("exec sleep 30\n", {"timeoutSeconds": 1}, ""),
    ],
    ids=["python-fails", "python-times-out"],
)
def test_a_broken_python_falls_back_and_the_session_goes_on(claude: Claude, script: str, options: dict[str, Any], reason: str) -> None:
    broken = claude.root / "broken-python"
    broken.write_text("#!/bin/sh\n" + script)
    broken.chmod(0o755)
    sid, compacted = run_and_compact(claude, python=str(broken), **options)
    [toast] = compacted.toasts()
    assert toast.startswith("fallback to built-in summary (") and reason in toast
    assert len(claude.api.summarizer_requests()) == 1
    assert [b["trigger"] for b in compacted.boundaries()] == ["manual"]
    # The Python side never answered; the mod left the row.
    [(row, decisions)] = claude.decisions()
    assert (row.outcome, row.fallback_reason, row.session_id, row.trigger) == ("fallback", "broken-interpreter", sid, "manual")
    assert reason in row.reason and decisions == []
    follow = claude.run("what now?", resume=sid)
    assert follow.returncode == 0 and follow.result["is_error"] is False


def test_compact_instructions_reach_the_goal(claude: Claude) -> None:
    _sid, compacted = run_and_compact(claude, command="/compact keep the numbers")
    assert compacted.toasts()[0].endswith(", no summary")
    assert "goal: do the thing | Focus for this compaction: keep the numbers" in claude.hook_log()


def test_missing_environment_toasts_and_uses_the_built_in_summary(claude: Claude) -> None:
    # No interpreter configured and no prepared venv: the mod says so and starts the bootstrap.
    claude.extra_env["FAST_JEV_PYTHON"] = ""
    claude.extra_env["FAST_JEV_BOOTSTRAP_SOURCE"] = str(claude.root / "no-such-package")
    sid, compacted = run_and_compact(claude)
    assert compacted.toasts() == [PREPARING]
    assert len(claude.api.summarizer_requests()) == 1
    [(row, _decisions)] = claude.decisions()  # left by the mod, replayed by the reader
    assert (row.outcome, row.fallback_reason, row.session_id) == ("fallback", "python-not-ready", sid)
    assert "worker started" in (claude.data_dir / "bootstrap.log").read_text()


# --------------------------------------------------------------------------- automatic compaction


def test_engine_auto_compaction_mid_turn_keeps_the_trailing_pair(claude: Claude) -> None:
    # Input tokens grow with the request, so the context crosses --autocompact mid-turn and the
    # pruned history falls back under it (a constant would trip the thrash breaker).
    claude.api.token_factor = 4.0
    run = claude.run("do the thing", "--autocompact", "100000", settings=claude.settings(preserveRecentMessages=2))
    assert run.returncode == 0 and run.result["is_error"] is False
    assert run.result["result"] == FINAL_TEXT
    [boundary] = run.boundaries()
    assert boundary["trigger"] == "auto"
    assert run.toasts()[0].endswith(", no summary")
    assert claude.api.summarizer_requests() == []

    [(row, decisions)] = claude.decisions()
    assert (row.outcome, row.trigger) == ("replaced", "auto")
    requests = claude.api.message_requests()
    # The compaction ran between two requests of the same turn: the first one that shrank.
    sizes = [len(json.dumps(conversation(r))) for r in requests]
    index = next(i for i in range(1, len(requests)) if sizes[i] < sizes[i - 1])
    after = items(requests[index])
    # The compaction came between a tool's run and the model reading its result: that exchange
    # (step 4, `seq 5000 7000`) goes on verbatim, its whole output included.
    use, result = after[-2:]
    assert use[0] == "tool_use" and json.loads(use[2]) == {"command": "seq 5000 7000", "description": "More numbers"}
    assert result == ("tool_result", use[1], "\n".join(str(n) for n in range(5000, 7001)))
    trailing = next(d for d in decisions if d.tool_use_id == use[1])
    assert (trailing.action, trailing.reason) == ("keep", "pinned")
    # Nothing was asked twice: every scenario step ran exactly once (counted over every request,
    # since the ladder may move the older part of the turn in flight to the archive).
    ids = {i[1] for r in requests for i in items(r) if i[0] == "tool_use"}
    assert len(ids) == 5
    final = items(requests[-1])
    uses = [i[2] for i in final if i[0] == "tool_use"]
    assert len(uses) == len(set(uses))


def test_turn_complete_compacts_past_compact_at_percent_interactively(claude: Claude) -> None:
    """The 60 % trigger needs an interactive session: headless, $.session.compact() is refused.

    Driven through tmux: the prompt is typed, the answer's usage puts the context at 70 %, and
    turn.complete asks for a compaction that the plugin's own session.compact hook performs.
    """
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (.ci/install-claude.sh installs it with apt-get); the TUI cannot be driven")
    claude.api.base_tokens = 700_000  # of the default model's 1,000,000-token window
    # The fake reports 70 % of the window for a small conversation: any pass that frees
    # something is worth it here, so the minimum share of the window is off.
    tui = Tui(claude, tmux)
    try:
        screen = tui.start(claude.settings(preserveRecentMessages=2, minFreedPercent=0))
        assert "bypass permissions" in screen, screen
        tui.type("do the thing")
        rows = wait_for(claude.decisions, lambda found: bool(found))
        screen = wait_for(tui.screen, lambda s: "no summary" in s)
    finally:
        tui.close()
    assert [(row.trigger, row.outcome) for row, _ in rows] == [("plugin", "replaced")]
    assert re.search(r"context at 7\d% \(threshold 60%\): compacting", screen), screen
    assert claude.api.summarizer_requests() == []


# --------------------------------------------------------------------------- recovery


def test_a_truncated_and_a_dropped_output_are_each_recovered_with_one_read(claude: Claude) -> None:
    """Every cut is recoverable: the model reads a marker's path and gets the original back."""
    settings = claude.settings(preserveRecentMessages=2)
    first = claude.run("do the rereading thing", settings=settings)
    assert first.returncode == 0 and first.result["result"] == FINAL_TEXT
    originals = {
        item[1]: item[2] for item in items(claude.api.message_requests()[-1]) if item[0] == "tool_result"
    }
    compacted = claude.run("/compact", resume=first.session_id, settings=settings)
    assert compacted.returncode == 0 and compacted.toasts()[0].endswith(", no summary"), compacted.toasts()
    [(_row, decisions)] = claude.decisions()
    cut = {d.tool_use_id: d for d in decisions if d.action != "keep"}
    assert {d.action for d in cut.values()} == {"truncate", "drop"}, [(d.action, d.reason) for d in decisions]
    assert any(d.rule == "superseded-reread" for d in cut.values())

    recovered = claude.run("please read back the saved outputs", resume=first.session_id, settings=settings)
    assert recovered.returncode == 0 and recovered.result["result"] == FINAL_TEXT
    last = claude.api.message_requests()[-1]
    turn = conversation(last)
    asked_at = max(
        i for i, m in enumerate(turn)
        if m["role"] == "user" and any("read back the saved outputs" in b.get("text", "") for b in _blocks(m))
    )
    reads = {
        block["id"]: block["input"]["file_path"]
        for message in turn[asked_at:] if message["role"] == "assistant"
        for block in _blocks(message) if block.get("type") == "tool_use" and block["name"] == "Read"
    }
    got = {item[1]: item[2] for item in items(last) if item[0] == "tool_result" and item[1] in reads}
    # One Read per saved file (identical outputs share one), each of a marker's path, and each
    # brings the original back.
    by_path = {d.archive_path: originals[tool_use_id] for tool_use_id, d in cut.items()}
    assert len(got) == len(reads) == len(by_path) >= 2
    assert set(reads.values()) == set(by_path)
    for read_id, text in got.items():
        original = by_path[reads[read_id]]
        # The Read tool numbers the lines (and shows at most 2,000 of them): strip the numbers.
        shown = [line.split("\t", 1)[1] if "\t" in line else line.split("→", 1)[-1] for line in text.splitlines()]
        assert shown[:50] == original.splitlines()[:50]
        assert len(shown) >= min(len(original.splitlines()), 2000) - 1
