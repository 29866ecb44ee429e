"""Generated sessions in factkeep's manner: one needle (a unique value) in one tool output among
ordinary work, and a later prompt that asks for it.

The tools vary (reads of code and config, searches, listings, test and build runs, fetched docs,
git output), so do the outputs' sizes and where the needle sits: the output, and the line within
it. The needle is a unique string, so "kept in context" is a plain substring check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse

# What the needle names, and the prompt that asks for it: (subject, question).
_SUBJECTS = (
    ("ledger_shard_key", "Which ledger_shard_key does the staging config set?"),
    ("webhook_signing_salt", "What webhook_signing_salt did the docs give?"),
    ("flaky_seed", "Which flaky_seed made the test run fail earlier?"),
    ("release_build_hash", "What was the release_build_hash in that output?"),
    ("pool_max_connections", "What pool_max_connections value did we see?"),
)


def _code(rng: random.Random, lines: int, name: str) -> list[str]:
    out = [f"class {name.title()}Handler:"]
    for n in range(lines // 2):
        out.append(f"    def step_{name}_{n}(self, request):  # revision {rng.randrange(10**6)}")
        out.append(f"        return self.client.send(request, attempt={rng.randrange(9)})")
    return out


def _listing(rng: random.Random, lines: int, name: str) -> list[str]:
    return [f"/srv/{name}/pkg{rng.randrange(40)}/file{n}.py" for n in range(lines)]


def _matches(rng: random.Random, lines: int, name: str) -> list[str]:
    return [f"/srv/app/{name}{rng.randrange(30)}.py:{rng.randrange(900)}:    handler = {name}_registry.lookup(key)" for _ in range(lines)]


def _test_log(rng: random.Random, lines: int, name: str) -> list[str]:
    return [f"tests/test_{name}_{rng.randrange(60)}.py::test_case_{n} PASSED [{n * 100 // lines:3d}%]" for n in range(lines)]


def _docs(rng: random.Random, lines: int, name: str) -> list[str]:
    return [f"Section {n}: the {name} endpoint accepts batched requests of up to {rng.randrange(99)} items." for n in range(lines)]


def _config(rng: random.Random, lines: int, name: str) -> list[str]:
    return [f"{name}_setting_{n}: value_{rng.randrange(9999)}" for n in range(lines)]


def _git_log(rng: random.Random, lines: int, name: str) -> list[str]:
    return [f"{rng.getrandbits(28):07x} {name}: adjust retry handling in module {n}" for n in range(lines)]


# (tool, body maker, input maker) of the ordinary calls a session is made of.
_CALLS: tuple[tuple[str, Callable[[random.Random, int, str], list[str]], Callable[[str], dict[str, Any]]], ...] = (
    ("Read", _code, lambda name: {"file_path": f"/srv/app/{name}.py"}),
    ("Read", _config, lambda name: {"file_path": f"/srv/config/{name}.yaml"}),
    ("Grep", _matches, lambda name: {"pattern": f"{name}_registry", "path": "/srv/app"}),
    ("Glob", _listing, lambda name: {"pattern": f"/srv/{name}/**/*.py"}),
    ("Bash", _test_log, lambda name: {"command": f"{{runner}}{name}"}),
    ("Bash", _git_log, lambda name: {"command": f"git log --oneline -- {name}"}),
    ("WebFetch", _docs, lambda name: {"url": f"https://docs.example.dev/{name}", "prompt": "limits"}),
)


# Each test run of a session uses another runner: a later run of the same suite replaces an
# earlier one (rules.py, superseded-older-run), a rule's doing that would hide the judge's.
_RUNNERS = ("pytest -q tests/", "go test ./", "cargo test -p ", "npx vitest run ", "make check-", "tox -e ")


@dataclass
class NeedleSession:
    messages: list[SessionMessage] = field(default_factory=list)
    needle: str = ""


def needle_session(seed: int) -> NeedleSession:
    rng = random.Random(seed)
    out = NeedleSession()
    subject, question = _SUBJECTS[seed % len(_SUBJECTS)]
    out.needle = f"{subject} = NX{seed:03d}{rng.getrandbits(32):08x}"
    calls = rng.randrange(12, 20)
    holder = rng.randrange(0, calls - 3)  # not among the newest, which a compaction leaves alone
    out.messages.append(SessionMessage(role="user", text="Tidy up the payments service and get its tests green."))
    runners = list(_RUNNERS)
    rng.shuffle(runners)
    for n in range(calls):
        tool, body, inputs = _CALLS[rng.randrange(len(_CALLS))]
        while body is _test_log and not runners:
            tool, body, inputs = _CALLS[rng.randrange(len(_CALLS))]
        name = f"area{seed}x{n}"
        lines = body(rng, rng.choice((15, 40, 90, 160, 300)), name)
        if n == holder:
            lines.insert(rng.randrange(len(lines) + 1), out.needle)
        given = inputs(name)
        if body is _test_log:
            given = {"command": given["command"].replace("{runner}", runners.pop())}
        tool_use_id = f"toolu_{seed:03d}_{n:02d}"
        text = "Looking further." if rng.random() < 0.3 else ""
        out.messages.append(
            SessionMessage(role="assistant", text=text, toolUses=(ToolUse(tool_use_id=tool_use_id, tool=tool, input=given),))
        )
        out.messages.append(
            SessionMessage(role="user", toolResults=(ToolResult(tool_use_id=tool_use_id, text="\n".join(lines)),))
        )
        if n == calls // 2:
            out.messages.append(SessionMessage(role="assistant", text="Halfway through; the remaining modules next."))
            out.messages.append(SessionMessage(role="user", text="Keep going."))
    out.messages.append(SessionMessage(role="assistant", text="Done with the pass over the modules."))
    out.messages.append(SessionMessage(role="user", text=question))
    return out
