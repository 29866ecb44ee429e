"""A scripted stand-in for the Anthropic Messages API, good enough to drive the real ``claude``.

It speaks SSE on ``POST /v1/messages`` and decides each reply by rules over the request:

1. the built-in summarizer prompt -> ``<summary>FAKE SUMMARY</summary>``;
2. the last user message carries a tool_result -> the next step of the running scenario, or a
   final text once the scenario has no steps left;
3. the last user text names a scenario (``do the thing``, ``do a small thing``) -> its first step;
4. anything else -> an echo.

``usage.input_tokens`` grows with the size of the request's ``messages`` so that a compaction
that shrinks the history also shrinks what the engine believes the context holds (a constant
would refill the context at once and trip the engine's autocompact thrash breaker).

Every request is kept in :attr:`FakeAnthropic.requests` and appended to a JSONL log.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SUMMARY_TEXT = "<analysis>fake analysis</analysis>\n<summary>FAKE SUMMARY of the conversation.</summary>"
FINAL_TEXT = "Done. All steps ran. FINAL ANSWER."


@dataclass(frozen=True)
class Step:
    """One model response: a tool call, plus ``also`` more calls in the same response (parallel)."""

    tool: str
    input: dict[str, Any]
    text: str = ""
    also: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(self.tool, self.input), *self.also]


# Large, low-value outputs first and a small one last: the early pairs are the ones a
# compaction can drop, the recent ones stay pinned.
SCENARIOS: dict[str, list[Step]] = {
    "do the thing": [
        Step("Bash", {"command": "seq 1 3000", "description": "List numbers"}, "Listing numbers first."),
        Step("Bash", {"command": "yes 'filler line of build output' | head -n 600", "description": "Print filler"}),
        Step("Read", {"file_path": "{cwd}/big.txt"}, "Reading the data file."),
        Step("Bash", {"command": "seq 5000 7000", "description": "More numbers"}),
        Step("Bash", {"command": "echo hello", "description": "Print hello"}, "Almost done."),
    ],
    # The same file read twice (from line 1, then whole: inputs differ so the script can tell the
    # steps apart): the first read is redundant (a rule drops it), the listing is cut.
    "do the rereading thing": [
        Step("Read", {"file_path": "{cwd}/big.txt", "offset": 1}, "Reading the data file."),
        Step("Bash", {"command": "seq 1 3000", "description": "List numbers"}),
        Step("Bash", {"command": "echo 'data row 2001' >> {cwd}/big.txt", "description": "Add a row"}),
        Step("Read", {"file_path": "{cwd}/big.txt"}, "Reading it again."),
        Step("Bash", {"command": "echo hello", "description": "Print hello"}, "Almost done."),
    ],
    "do a small thing": [
        Step("Bash", {"command": "echo hello", "description": "Print hello"}),
    ],
    # Later rounds of a growing session: each brings outputs of its own (no two rounds share
    # one), so each compaction has something new to cut and each archive file one original.
    "do round two": [
        Step("Bash", {"command": "seq 100000 103000", "description": "List round two numbers"}, "Round two."),
        Step("Bash", {"command": "yes 'round two build output' | head -n 700", "description": "Print round two filler"}),
        Step("Bash", {"command": "echo two done", "description": "Print two done"}, "Round two almost done."),
    ],
    # notes.txt is read, changed, then read whole again: the first read is redundant (dropped).
    "do round three": [
        Step("Bash", {"command": "seq 300000 302500", "description": "List round three numbers"}, "Round three."),
        Step("Read", {"file_path": "{cwd}/notes.txt", "offset": 1}, "Reading the notes."),
        Step("Bash", {"command": "yes 'round three test log line' | head -n 800", "description": "Print round three log"}),
        Step("Bash", {"command": "echo 'notes row 1501' >> {cwd}/notes.txt", "description": "Add a note"}),
        Step("Read", {"file_path": "{cwd}/notes.txt"}, "Reading the notes again."),
        Step("Bash", {"command": "echo three done", "description": "Print three done"}, "Round three almost done."),
    ],
    # Turns of 2, 3 and 4 calls at once, as current models make them; big and small outputs mixed
    # inside each turn so a compaction keeps, truncates and drops calls of the same turn.
    "do things at once": [
        Step(
            "Bash",
            {"command": "seq 1 3000", "description": "List numbers"},
            "Looking at two things at once.",
            also=(("Read", {"file_path": "{cwd}/big.txt"}),),
        ),
        Step(
            "Bash",
            {"command": "yes 'filler line of build output' | head -n 600", "description": "Print filler"},
            also=(
                ("Bash", {"command": "echo small one", "description": "Print a word"}),
                ("Bash", {"command": "seq 9000 11000", "description": "More numbers"}),
            ),
        ),
        Step(
            "Read",
            {"file_path": "{cwd}/big.txt", "offset": 100, "limit": 400},
            "Four reads together.",
            also=(
                ("Bash", {"command": "seq 20000 22000", "description": "Numbers again"}),
                ("Bash", {"command": "echo tiny", "description": "Print tiny"}),
                ("Bash", {"command": "yes 'noise' | head -n 900", "description": "Print noise"}),
            ),
        ),
        Step(
            "Bash",
            {"command": "echo last", "description": "Print last"},
            "Almost done.",
            also=(("Bash", {"command": "echo really last", "description": "Print really last"}),),
        ),
    ],
}

# A file the model writes whole: its body is a long tool input (the ladder's rung b moves it to
# the archive once the outputs are cut), each line its own so a read-back shows any loss.
REPORT = "".join(f"report line {n}: the parser keeps field {n} exactly as it was read.\n" for n in range(1, 301))
SCENARIOS["do the writing thing"] = [
    Step("Write", {"file_path": "{cwd}/report.md", "content": REPORT}, "Writing the report."),
    Step("Bash", {"command": "seq 1 3000", "description": "List numbers"}),
    Step("Bash", {"command": "echo written", "description": "Print written"}, "Almost done."),
]

# Prose the model writes at length beside each call: a compaction keeps it verbatim, so the
# pruned history of "do the long thing" (about 5 MB of UTF-8) stays over the host's 4 MiB cap on
# the hook's output. Mostly CJK: about 3 bytes a character, so the engine's own estimate of the
# history (by characters) stays under the default model's 1M-token window; ASCII prose of that
# size would be over it, and the engine would refuse the next request ("Prompt is too long").
LONG_PROSE = "".join(f"设计说明第{n}条：解析器按读取时的原样保留每一个字段，包括非ASCII的字符与符号✓。\n" for n in range(13_000))
SCENARIOS["do the long thing"] = [
    Step("Bash", {"command": "seq 1 3000", "description": "List numbers"}, f"Part one. {LONG_PROSE}"),
    Step("Bash", {"command": "yes 'filler line of build output' | head -n 600", "description": "Print filler"}, f"Part two. {LONG_PROSE}"),
    Step("Read", {"file_path": "{cwd}/big.txt"}, f"Part three. {LONG_PROSE}"),
    Step("Bash", {"command": "echo hello", "description": "Print hello"}, f"Part four. {LONG_PROSE}"),
]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The user/assistant messages of a request (the engine also interleaves ``system`` ones)."""
    return [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]


def is_summarizer(body: dict[str, Any]) -> bool:
    messages = conversation(body)
    if not messages or messages[-1].get("role") != "user":
        return False
    text = _text_of(messages[-1].get("content")).lower()
    return "summary" in text and ("conversation" in text or "summarize" in text)


def _scenario_of(messages: list[dict[str, Any]]) -> str | None:
    # The most recent user prompt that names a scenario drives the tool steps.
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = _text_of(message.get("content"))
        for name in sorted(SCENARIOS, key=len, reverse=True):
            if name in text:
                return name
    return None


def _tool_results_since_prompt(messages: list[dict[str, Any]], scenario: str) -> int:
    count = 0
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        if scenario in _text_of(message.get("content")) and not _has_tool_result(message.get("content")):
            break
        if _has_tool_result(message.get("content")):
            count += sum(1 for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
    return count


def _next_step(steps: list[Step], results: int) -> Step | None:
    """The step that follows once ``results`` tool results came back (a step waits for all its calls)."""
    for step in steps:
        if results <= 0:
            return step
        results -= len(step.calls)
    return None


def _step_after_last_call(messages: list[dict[str, Any]], steps: list[Step], cwd: str) -> tuple[bool, Step | None]:
    """Whether the last tool call belongs to a step, and the step after it (None after the last).

    Counting results would replay a step once a compaction has dropped some of them.
    """
    calls = [b for m in messages[-2:-1] for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
    for index, step in enumerate(steps):
        filled = _step_reply(step, cwd).tool
        if filled is not None and any(c.get("input") in [values for _, values in filled.calls] for c in calls):
            return True, steps[index + 1] if index + 1 < len(steps) else None
    return False, None


@dataclass
class Reply:
    text: str = ""
    tool: Step | None = None


# A prompt that makes the model read back, one Read each, every file a marker names.
RECOVER = "read back the saved outputs"
# The same, and then every file named in what those reads brought back (an old turn's file names
# the files of the outputs and inputs cut before it moved), until no new file is named.
RECOVER_ALL = "follow every saved file"
SAVED_AT = re.compile(r"saved at (\S+?); Read it if needed\]")
# Any marker's path: a cut output's, an old turn's, or a moved input's ("…; Read it if needed;
# the file on disk holds its current content]").
ANY_SAVED_AT = re.compile(r"saved at (\S+?); Read it if needed[\];]")


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    out: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        inner = block.get("content") if block.get("type") == "tool_result" else block.get("text")
        out.append((_text_of(inner) if not isinstance(inner, str) else inner) or "")
    return out


def _recovery(messages: list[dict[str, Any]]) -> Reply | None:
    starts = [
        (i, RECOVER_ALL in text) for i, m in enumerate(messages)
        if m.get("role") == "user" and not _has_tool_result(m.get("content"))
        and ((text := _text_of(m.get("content"))) and (RECOVER in text or RECOVER_ALL in text))
    ]
    if not starts:
        return None
    start, follow = starts[-1]
    pattern = ANY_SAVED_AT if follow else SAVED_AT
    paths: list[str] = []
    for message in messages[:start] + (messages[start + 1 :] if follow else []):
        for text in _texts(message):
            for path in pattern.findall(text):
                if path not in paths:
                    paths.append(path)
    done = sum(
        1 for m in messages[start + 1 :] if m.get("role") == "user"
        for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    if done < len(paths):
        return Reply(tool=Step("Read", {"file_path": paths[done]}))
    return Reply(text=FINAL_TEXT)


def decide(body: dict[str, Any], cwd: str) -> Reply:
    messages = conversation(body)
    if is_summarizer(body):
        return Reply(text=SUMMARY_TEXT)
    if not messages:
        return Reply(text="(empty request)")
    recovery = _recovery(messages)
    if recovery is not None and body.get("tools"):
        return recovery
    last = messages[-1]
    scenario = _scenario_of(messages)
    has_tools = bool(body.get("tools"))
    if last.get("role") == "user" and _has_tool_result(last.get("content")):
        if scenario and has_tools:
            known, step = _step_after_last_call(messages, SCENARIOS[scenario], cwd)
            if not known:
                step = _next_step(SCENARIOS[scenario], _tool_results_since_prompt(messages, scenario))
            if step is not None:
                return _step_reply(step, cwd)
        return Reply(text=FINAL_TEXT)
    text = _text_of(last.get("content"))
    for name in sorted(SCENARIOS, key=len, reverse=True):
        if name in text and has_tools:
            return _step_reply(SCENARIOS[name][0], cwd)
    return Reply(text=f"Echo: {text[-200:]}")


def _step_reply(step: Step, cwd: str) -> Reply:
    def filled(values: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.replace("{cwd}", cwd) if isinstance(v, str) else v) for k, v in values.items()}

    also = tuple((tool, filled(values)) for tool, values in step.also)
    return Reply(text=step.text, tool=Step(step.tool, filled(step.input), step.text, also))


@dataclass
class FakeAnthropic:
    """The server plus its knobs; start it with :meth:`start`, stop it with :meth:`stop`."""

    log_path: Path
    cwd: str = "/tmp"
    base_tokens: int = 1000
    token_factor: float = 1.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    def input_tokens(self, body: dict[str, Any]) -> int:
        size = len(json.dumps(conversation(body)))
        return int(self.base_tokens + self.token_factor * size / 4)

    def record(self, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body})
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"path": path, "body": body}) + "\n")

    def message_requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].startswith("/v1/messages") and "count_tokens" not in r["path"]]

    def summarizer_requests(self) -> list[dict[str, Any]]:
        return [b for b in self.message_requests() if isinstance(b, dict) and is_summarizer(b)]

    def start(self) -> "FakeAnthropic":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                return

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.record(self.path, None)
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake"}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                fake.record(self.path, body)
                if self.path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": fake.input_tokens(body)})
                    return
                if not self.path.startswith("/v1/messages"):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                    return
                reply = decide(body, fake.cwd)
                if body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, fake.message_json(body, reply))

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                chunks = b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in fake.events(body, reply))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(chunks)))
                self.end_headers()
                self.wfile.write(chunks)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _blocks(self, reply: Reply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for tool, values in reply.tool.calls if reply.tool is not None else []:
            blocks.append({"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": tool, "input": values})
        return blocks

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        return {"input_tokens": self.input_tokens(body), "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

    def message_json(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        return {
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": self._blocks(reply),
            "stop_reason": "tool_use" if reply.tool else "end_turn",
            "stop_sequence": None,
            "usage": self._usage(body),
        }

    def events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        start = self.message_json(body, reply)
        start = {**start, "content": [], "stop_reason": None, "usage": {**start["usage"], "output_tokens": 1}}
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
        for index, block in enumerate(self._blocks(reply)):
            if block["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}))
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                shell = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": shell}))
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "tool_use" if reply.tool else "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 20}},
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events
