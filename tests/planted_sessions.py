"""Generated coding sessions with planted facts that the next turn needs.

Each session is typical work (reads, searches, test runs, edits, a commit, a pull request, a
question to the user, fetched docs, a config file, an open error) padded with old unremarkable
output, and carries facts planted where real sessions put them: the last test failure at the end
of a long log, ids printed by side effects, the user's answer, a value in the middle of fetched
docs, a value in a config file, an error not yet fixed. The facts are unique strings, so "kept in
context" and "recoverable from the archive" are plain substring checks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse


@dataclass
class Planted:
    messages: list[SessionMessage] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)  # kind -> the planted string


def _code(rng: random.Random, lines: int, name: str) -> str:
    body = []
    for n in range(lines):
        body.append(f"    def handler_{name}_{n}(self, request):  # step {rng.randrange(10**6)}")
        body.append(f"        return self.service.process(request, retries={rng.randrange(9)})")
    return f"class {name.title()}Service:\n" + "\n".join(body)


def _log(rng: random.Random, lines: int, tail: str) -> str:
    body = [f"tests/test_mod_{rng.randrange(50)}.py::test_case_{n} PASSED [{n * 100 // lines:3d}%]" for n in range(lines)]
    return "\n".join(["============================= test session starts ==============================", *body, tail])


def planted_session(seed: int, old_calls: int = 0) -> Planted:
    """One session; ``old_calls`` adds that many more old, unremarkable reads and searches before
    the work (a long session, for windowed states)."""
    rng = random.Random(seed)
    out = Planted()
    tag = f"{seed:04d}"
    calls = 0

    def call(tool: str, output: str, text: str = "", is_error: bool = False, **tool_input: Any) -> None:
        nonlocal calls
        calls += 1
        tool_use_id = f"toolu_{tag}_{calls:03d}"
        out.messages.append(
            SessionMessage(role="assistant", text=text, toolUses=(ToolUse(tool_use_id=tool_use_id, tool=tool, input=tool_input),))
        )
        out.messages.append(
            SessionMessage(role="user", toolResults=(ToolResult(tool_use_id=tool_use_id, text=output, isError=is_error),))
        )

    facts = out.facts
    facts["user answer"] = f"use the blue-green rollout {tag}"
    facts["commit"] = f"[main {rng.getrandbits(28):07x}{tag}] fix refund rounding"
    facts["pull request"] = f"https://github.com/acme/payments/pull/{1000 + seed}"
    facts["docs value"] = f"max_retry_budget = {seed * 7 + 3}ms"
    facts["config value"] = f"ledger_port: {20000 + seed}"
    facts["last failure"] = f"FAILED tests/test_refunds.py::test_partial_{tag} - AssertionError: 0.{seed}1 != 0.{seed}0"
    facts["open error"] = f"ModuleNotFoundError: No module named 'ledger_{tag}'"

    out.messages.append(SessionMessage(role="user", text="Fix the failing refund tests in the payments service.", handle=f"h-{tag}-0"))
    # Old, unremarkable output: large reads and listings the session moved past.
    for n in range(rng.randrange(4, 8)):
        call("Read", _code(rng, rng.randrange(80, 200), f"module{n}"), "Reading the code." if n == 0 else "",
             file_path=f"/repo/src/module{n}.py")
    for n in range(old_calls):
        if n % 3 == 2:
            call("Grep", "\n".join(f"/repo/lib/part{k}.py:{m}: handler_{n}" for k in range(8) for m in range(40)),
                 pattern=f"handler_{n}", path="/repo/lib")
        else:
            call("Read", _code(rng, rng.randrange(80, 200), f"old{n}"), file_path=f"/repo/lib/old{n}.py")
    call("Bash", "\n".join(f"/repo/src/pkg{n}/file{m}.py" for n in range(30) for m in range(12)), command="find /repo/src -name '*.py'")
    call("Grep", "\n".join(f"/repo/src/module{n}.py:{m}: refund" for n in range(8) for m in range(40)), pattern="refund")
    call("Bash", _log(rng, rng.randrange(300, 600), "===== 1 failed, 420 passed in 31.2s ====="), command="pytest -q")
    # Fetched docs, a value in the middle.
    docs = [f"Section {n}: the payments gateway accepts idempotent requests." for n in range(40)]
    docs.insert(20, facts["docs value"])
    call("WebFetch", "\n".join(docs), url="https://docs.acme.dev/gateway", prompt="retry settings")
    # The config file, a value in the middle.
    config = [f"setting_{n}: value_{rng.randrange(999)}" for n in range(30)]
    config.insert(15, facts["config value"])
    call("Read", "\n".join(config), file_path="/repo/config/payments.yaml")
    # The user's answer to a question.
    call("AskUserQuestion", f'User has answered your questions: "Which rollout?"="{facts["user answer"]}"',
         questions=[{"question": "Which rollout?"}])
    # Edits and the latest test run, failing at the end of a long log.
    call("Edit", "The file /repo/src/refunds.py has been updated.", file_path="/repo/src/refunds.py",
         old_string="round(x, 2)", new_string="quantize(x)")
    call("Bash", _log(rng, rng.randrange(300, 600), facts["last failure"] + "\n===== 1 failed, 421 passed in 30.9s ====="),
         "Running the tests again.", command="pytest -q")
    call("Bash", f"{facts['commit']}\n 2 files changed, 14 insertions(+), 3 deletions(-)", command="git commit -am 'fix refund rounding'")
    call("Bash", f"Creating pull request for fix-refunds into main\n\n{facts['pull request']}", command="gh pr create --fill")
    # An error not followed by a success of the same command.
    call("Bash", f"Traceback (most recent call last):\n  File \"/repo/tools/migrate.py\", line 3\n{facts['open error']}",
         is_error=True, command="python tools/migrate.py")
    # More unremarkable output after the work, then the newest exchange.
    for n in range(rng.randrange(2, 5)):
        call("Read", _code(rng, rng.randrange(80, 200), f"extra{n}"), file_path=f"/repo/src/extra{n}.py")
    out.messages.append(SessionMessage(role="assistant", text="The refund tests still fail on one partial case; next I look at the migration error."))
    out.messages.append(SessionMessage(role="user", text="Go on.", handle=f"h-{tag}-last"))
    return out
