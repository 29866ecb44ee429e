"""Synthetic Claude Code transcripts of any length, for benchmarks and scale tests.

The shape follows the corpus's long sessions: a user request now and then, assistant turns with
short texts and tool calls (reads, edits, searches, shell commands, re-reads of the same files),
and tool outputs of a few hundred characters: about 250 bytes of JSONL per message, so 200,000
messages make a 50 MB transcript.
"""

from __future__ import annotations

import json
import random
from typing import Iterator

_WORDS = (
    "the function returns a value when the cache holds an entry for the key and otherwise reads "
    "from disk parses the header checks the version and raises an error on mismatch"
).split()


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _code(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"{n:>4}\t{rng.choice(('def', 'return', 'if', 'for'))} item_{rng.randrange(999)}({_prose(rng, 2)})"
        for n in range(1, lines + 1)
    )


def _tool(rng: random.Random, turn: int) -> tuple[str, dict[str, object], str]:
    path = f"src/module_{rng.randrange(max(2, turn // 40 + 2))}.py"
    kind = rng.random()
    if kind < 0.45:
        return "Read", {"file_path": path}, _code(rng, rng.randrange(2, 9))
    if kind < 0.65:
        return "Bash", {"command": f"pytest -q tests/test_{turn % 17}.py"}, _code(rng, rng.randrange(1, 6))
    if kind < 0.8:
        return "Grep", {"pattern": f"item_{rng.randrange(99)}", "path": "src"}, "\n".join(
            f"{path}:{rng.randrange(1, 400)}: {_prose(rng, 4)}" for _ in range(rng.randrange(1, 3))
        )
    old = _prose(rng, 5)
    return "Edit", {"file_path": path, "old_string": old, "new_string": _prose(rng, 5)}, f"The file {path} has been updated."


class _Chain:
    """A session's JSONL records, each the parent of the next; counts them and their bytes."""

    def __init__(self, prefix: str, session: str) -> None:
        self.prefix, self.session = prefix, session
        self.parent: str | None = None
        self.count = 0
        self.written = 0

    def record(self, kind: str, message: dict[str, object]) -> str:
        uuid = f"{self.prefix}{self.count:08d}"
        line = json.dumps({"type": kind, "uuid": uuid, "parentUuid": self.parent, "sessionId": self.session, "message": message})
        self.parent, self.count, self.written = uuid, self.count + 1, self.written + len(line) + 1
        return line

    def call(
        self, rng: random.Random, words: tuple[int, int], ids: tuple[str, str], tool: str, tool_input: object, output: str
    ) -> Iterator[str]:
        """An assistant turn (a short text, one tool call) and the user record with its result;
        ``ids`` are the message id and the tool_use id."""
        message_id, tool_id = ids
        content = [
            {"type": "text", "text": _prose(rng, rng.randrange(*words))},
            {"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input},
        ]
        yield self.record("assistant", {"role": "assistant", "id": message_id, "content": content})
        yield self.record("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]})


def transcript_lines(messages: int, seed: int = 7) -> Iterator[str]:
    """About ``messages`` JSONL records: user prompts, assistant turns with one tool call each, results."""
    rng = random.Random(seed)
    chain = _Chain("u", "synthetic")
    record = chain.record
    turn = 0
    yield record("user", {"role": "user", "content": f"Please {_prose(rng, 12)}."})
    while chain.count < messages:
        turn += 1
        if turn % 25 == 0:
            yield record("user", {"role": "user", "content": f"Now {_prose(rng, 15)}."})
            continue
        tool, tool_input, output = _tool(rng, turn)
        yield from chain.call(rng, (2, 10), (f"msg_{turn}", f"toolu_{turn:08d}"), tool, tool_input, output)
    yield record("assistant", {"role": "assistant", "id": "msg_last", "content": [{"type": "text", "text": "Done."}]})


def _sized_output(rng: random.Random, chars: int, kind: str) -> str:
    """Output of about ``chars`` characters: numbered code, a test log or listing lines."""
    lines: list[str] = []
    total = 0
    while total < chars:
        n = len(lines) + 1
        if kind == "code":
            line = f"{n:>4}\t{rng.choice(('def', 'return', 'if', 'for', 'class'))} item_{rng.randrange(9999)}({_prose(rng, 4)})"
        elif kind == "log":
            line = f"tests/test_{rng.randrange(80)}.py::test_{_prose(rng, 1)}_{n} PASSED [{rng.randrange(100):>3}%]"
        else:
            line = f"src/pkg_{rng.randrange(30)}/module_{rng.randrange(400)}.py:{rng.randrange(1, 900)}: {_prose(rng, 5)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def work_session_lines(target_bytes: int, seed: int = 11) -> Iterator[str]:
    """A working session of about ``target_bytes`` of JSONL, shaped like the corpus's long ones:
    reads of many different files (some read again), test runs, searches, listings and edits,
    outputs from a few hundred characters to tens of thousands (log-uniform), a user prompt now
    and then. About 2.8 kB of transcript per call, so 800 kB (~200k tokens) hold ~280 calls."""
    rng = random.Random(seed)
    chain = _Chain("w", "work")
    record = chain.record

    yield record("user", {"role": "user", "content": f"Please {_prose(rng, 14)} in src/pkg_3 and keep the tests green."})
    turn = 0
    files: list[str] = []
    while chain.written < target_bytes:
        turn += 1
        if turn % 20 == 0:
            mentioned = rng.choice(files) if files else "src"
            yield record("user", {"role": "user", "content": f"Now {_prose(rng, 12)}; look at {mentioned} too."})
            continue
        kind = rng.random()
        size = int(10 ** rng.uniform(2.0, 4.1))
        if kind < 0.4:
            path = rng.choice(files) if files and rng.random() < 0.15 else f"src/pkg_{rng.randrange(30)}/module_{turn}.py"
            files.append(path)
            tool, tool_input, output = "Read", {"file_path": path}, _sized_output(rng, size, "code")
        elif kind < 0.55:
            target = f"tests/test_{rng.randrange(12)}.py"
            tool, tool_input, output = "Bash", {"command": f"python -m pytest -q {target}"}, _sized_output(rng, size, "log")
        elif kind < 0.75:
            tool, tool_input = "Grep", {"pattern": f"item_{rng.randrange(9999)}", "path": "src"}
            output = _sized_output(rng, size // 3, "list")
        elif kind < 0.85:
            tool, tool_input = "Bash", {"command": f"ls -R src/pkg_{rng.randrange(30)}"}
            output = _sized_output(rng, size // 2, "list")
        else:
            path = rng.choice(files) if files else "src/main.py"
            tool, tool_input = "Edit", {"file_path": path, "old_string": _prose(rng, 6), "new_string": _prose(rng, 6)}
            output = f"The file {path} has been updated."
        yield from chain.call(rng, (4, 20), (f"msg_w{turn}", f"toolu_w{turn:06d}"), tool, tool_input, output)
    yield record("assistant", {"role": "assistant", "id": "msg_w_last", "content": [{"type": "text", "text": "Done."}]})
