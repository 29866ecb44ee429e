"""A scripted JevAsker and message builders shared by the core tests.

The asker answers every ``noul`` question from a policy, records each request (state and
questions, in arrival order), measures how many requests overlap, and fails on demand. It yields to
the event loop inside ``ask`` so concurrent requests really overlap instead of running one after
the other.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.state.asker import AskResult, Usage


class ScriptedFailure(Exception):
    """Raised by the asker when a request is scripted to fail."""


@dataclass
class Request:
    state: Any
    questions: dict[str, Any]


Policy = Callable[[str], Any]


def noul(p: Any) -> dict[str, Any]:
    return {"type": "noul", "noul": p}


@dataclass
class ScriptedAsker:
    """Answers ``{name: {"type": "noul", "noul": p}}`` with ``p = policy(name)``.

    ``policy`` may be a number (every answer), a mapping ``name -> p`` (missing names get
    ``default``) or a callable. ``raw`` overrides whole answer objects, so invalid shapes can be
    injected. ``fail_on`` holds 1-based request numbers that raise :class:`ScriptedFailure`.
    ``yields`` is how many times each request hands control back to the loop before answering.
    """

    policy: float | Mapping[str, float] | Policy = 0.0
    default: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict)
    fail_on: set[int] = field(default_factory=set)
    yields: int = 5
    usage: Usage | None = None
    retries: int = 0
    requests: list[Request] = field(default_factory=list)
    completed: int = 0
    in_flight: int = 0
    peak: int = 0

    def answer_for(self, name: str) -> Any:
        if name in self.raw:
            return self.raw[name]
        if callable(self.policy):
            return noul(self.policy(name))
        if isinstance(self.policy, Mapping):
            return noul(self.policy.get(name, self.default))
        return noul(self.policy)

    async def ask(self, state: Any, questions: Mapping[str, Any]) -> AskResult:
        # Deep copies: a later mutation by the caller must not rewrite what was sent.
        self.requests.append(Request(copy.deepcopy(state), copy.deepcopy(dict(questions))))
        number = len(self.requests)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            for _ in range(self.yields):
                await asyncio.sleep(0)
            if number in self.fail_on:
                raise ScriptedFailure(f"request {number} failed as scripted")
            answers = {name: self.answer_for(name) for name in questions}
            self.completed += 1
            return AskResult(answers=answers, usage=self.usage or Usage(), retries=self.retries)
        finally:
            self.in_flight -= 1

    @property
    def asked_names(self) -> list[str]:
        return [name for request in self.requests for name in request.questions]


def per_call(scores: Mapping[str, tuple[float, float]], default: float = 0.0) -> Policy:
    """A policy from ``{"t1": (keep_call, keep_result)}``."""

    def policy(name: str) -> float:
        kind, _, call_id = name.partition("_")
        if call_id not in scores:
            return default
        keep_call, keep_result = scores[call_id]
        return keep_call if kind == "call" else keep_result

    return policy


# -- message builders ---------------------------------------------------------------------------


def _fields(extra: dict[str, Any]) -> dict[str, Any]:
    """``handle`` is a field; any other keyword is an unknown member, kept in ``extra``."""
    fields = {"handle": extra.pop("handle")} if "handle" in extra else {}
    return {**fields, "extra": extra} if extra else fields


def user(text: str = "", **extra: Any) -> SessionMessage:
    return SessionMessage(role="user", text=text, **_fields(extra))


def assistant(text: str = "", *uses: ToolUse, **extra: Any) -> SessionMessage:
    return SessionMessage(role="assistant", text=text, toolUses=uses, **_fields(extra))


def use(tool_use_id: str, tool: str = "Read", text: str | None = None, is_error: bool | None = None, **input: Any) -> ToolUse:
    return ToolUse(tool_use_id=tool_use_id, tool=tool, input=input, text=text, isError=is_error)


def results(*items: ToolResult, text: str = "", **extra: Any) -> SessionMessage:
    return SessionMessage(role="user", text=text, toolResults=items, **_fields(extra))


def result(tool_use_id: str, text: str, is_error: bool | None = None) -> ToolResult:
    return ToolResult(tool_use_id=tool_use_id, text=text, isError=is_error)


def call(tool_use_id: str, tool: str = "Read", text: str = "", **input: Any) -> SessionMessage:
    """An assistant message holding exactly one tool_use."""
    return assistant(text, use(tool_use_id, tool, **input))


def pair(tool_use_id: str, output: str, tool: str = "Read", is_error: bool | None = None, **input: Any) -> list[SessionMessage]:
    """A call and its result, with the ToolUse carrying the usual copy of the outcome."""
    return [
        assistant("", use(tool_use_id, tool, text=output, is_error=is_error, **input)),
        results(result(tool_use_id, output, is_error)),
    ]


FILE_A = "export const a = 1;\n// FILE_A_BODY marker that must never reach the judge\n" * 4
FILE_B = "export const b = 2;\n// FILE_B_BODY marker\n" * 3
BASH_OUT = "FAIL src/a.test.ts\nBASH_OUTPUT_BODY expected 1 received 2\n"
FIRST_PROMPT = "Please fix the failing test in src/a.ts"
LAST_PROMPT = "latest: run the tests again and tell me the result"


def ten_messages() -> list[SessionMessage]:
    """Upstream's 10-message fixture: with preserve 3 it gives t1 Read 1->2, t2 Read 4->5, t3 Bash
    6->7 (pinned, error), and history entries for messages 0, 1, 3, 4, 6, 8 and 9."""
    return [
        user(FIRST_PROMPT),
        assistant("Let me read the file.", use("toolu_a", "Read", text=FILE_A, file_path="src/a.ts")),
        results(result("toolu_a", FILE_A)),
        assistant("The constant looks right; the test must be reading b."),
        assistant("", use("toolu_b", "Read", text=FILE_B, file_path="src/b.ts")),
        results(result("toolu_b", FILE_B)),
        assistant("Running the tests.", use("toolu_c", "Bash", text=BASH_OUT, is_error=True, command="npm test")),
        results(result("toolu_c", BASH_OUT, True)),
        assistant("The test fails because b is 2."),
        user(LAST_PROMPT),
    ]


def read_pairs(count: int, output: str = "x", first: str = "start", last: str = "done") -> list[SessionMessage]:
    """``first``, then ``count`` one-Read pairs of ``/repo/src/module-<k>.ts``, then ``last``."""
    messages = [user(first)]
    for k in range(count):
        messages += pair(f"toolu_{k}", output, "Read", file_path=f"/repo/src/module-{k}.ts")
    messages.append(user(last))
    return messages


def dump(messages: list[SessionMessage]) -> list[dict[str, Any]]:
    """A deep snapshot to prove the input was not mutated."""
    return [m.to_wire() for m in messages]
