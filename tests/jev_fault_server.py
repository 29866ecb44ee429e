"""A scriptable Jev-shaped HTTP server on 127.0.0.1 for client fault tests.

Each test scripts the replies (a sequence, the last one repeating, or a function of the request)
and can inject faults a real service produces: slow headers, a body that stalls after the headers,
a body cut short, malformed JSON, any status. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Reply:
    """One scripted response. ``body`` bytes/str go out verbatim; anything else as JSON."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Wait this long before the status line (a slow or hung upstream).
    delay_s: float = 0.0
    # Send the headers and half the body, then wait this long (a stalled body read).
    stall_s: float = 0.0
    # Send the headers and half the body, then close the connection (a body cut short).
    cut: bool = False

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body).encode("utf-8")


@dataclass
class Seen:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def answers_body(names: Sequence[str], value: float = 0.75, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A valid System One response answering every name with ``value``."""
    body: dict[str, Any] = {"model": "jev-test", "answers": {n: {"type": "noul", "noul": value} for n in names}}
    if usage is not None:
        body["usage"] = usage
    return body


Script = Sequence[Reply] | Callable[[Seen], Reply]


class FaultServer:
    """``with FaultServer([...]) as server:`` then point a client at ``server.url``."""

    def __init__(self, script: Script = ()) -> None:
        self.script = script
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        # Set on stop so sleeping handlers (stalls, delays) end promptly instead of lingering.
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _next_reply(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            index = len(self.requests) - 1
        if callable(self.script):
            return self.script(seen)
        if not self.script:
            return Reply(status=500, body="no reply scripted")
        return self.script[min(index, len(self.script) - 1)]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real service
            timeout = 10  # idle keep-alive connections must not pin a thread forever

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass  # keep test output clean

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next_reply(seen)
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    self.close_connection = True
                    return
                payload = reply.payload()
                partial = reply.stall_s > 0 or reply.cut
                try:
                    self.send_response(reply.status)
                    headers = {"content-type": "application/json", **reply.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    # A partial reply promises more bytes than it will ever send.
                    self.send_header("content-length", str(len(payload) + (100 if partial else 0)))
                    self.end_headers()
                    if not partial:
                        self.wfile.write(payload)
                        self.wfile.flush()
                        return
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    if reply.stall_s:
                        server._stopping.wait(reply.stall_s)
                    self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up first, as intended

            do_POST = _serve
            do_GET = _serve

        return Handler
