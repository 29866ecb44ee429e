"""``fast-jev serve``: the Jev protocol over HTTP, answered by the judge it is handed.

It lives beside the client and never imports a judge: ``commands/serve.py`` hands it the
embedded ``LocalJudge``.

Any Jev client (this project's, upstream's, a fork's) can point its base URL here and work
offline. The routes mirror the three hosted shapes: System One, OpenRouter Decisions and the two
Cloudflare Workers AI forms; each body is validated with its model in ``protocol.py`` (pydantic)
before the judge sees it, and a bad one is a 400 naming the field. The HTTP side is the standard
library's: one request is a few milliseconds of CPU, so a stdlib server with a bounded pool of
workers is enough.

Exposure: connections reach a worker only once their request head has arrived, and every read
has a timeout (``gate.py``), so stalled clients cannot starve real ones. A ``Host`` header must
name a loopback host or the bound address (or one allowed explicitly), which defeats DNS
rebinding from a browser; an optional bearer token guards everything but ``/healthz``.
"""

from __future__ import annotations

import hmac
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Mapping, Protocol
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from ..options import JEV_DEFAULT_MODEL
from ..state.asker import Usage
from ..state.protocol import CLOUDFLARE_CATALOG_ADAPTER, PAYLOAD_ADAPTER, SYSTEM_ONE_ADAPTER, first_problem
from ..textutil import js_json
from .connections import DEFAULT_TIMEOUT_S, DEFAULT_WORKERS, ConnectionReader, GatedHTTPServer

__all__ = ["DEFAULT_MODEL", "LOOPBACK_HOSTS", "MAX_BODY_BYTES", "JevServer", "is_loopback", "start_server"]

DEFAULT_MODEL = JEV_DEFAULT_MODEL
MAX_BODY_BYTES = 8 * 1024 * 1024
# The bodies being read and judged at once. Judging takes about a second of CPU per MiB and the
# workers share one interpreter: eight legal 3.6 MiB requests judged together kept each client
# waiting for all of them (~57 s, past a client's 15 s deadline). A request that would go past
# this is answered 503 at once, unless nothing else is being judged (one body up to
# MAX_BODY_BYTES is always taken); small requests still pass beside a large one.
MAX_BUSY_BYTES = 4 * 1024 * 1024

# "/" too: the base URL serve prints is a Jev URL as it is.
_SYSTEM_ONE_PATHS = frozenset({"/", "/v1/systemone", "/systemone", "/api/alpha/decisions", "/v1/decisions"})
_CF_CATALOG = re.compile(r"^/client/v4/accounts/[^/]+/ai/run/?$")
_CF_CLASSIC = re.compile(r"^/client/v4/accounts/[^/]+/ai/run/(.+)$")
_CF_PREFIX = "/client/v4/"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
ANY_HOST = "*"


def is_loopback(host: str) -> bool:
    """Whether a bound address is reachable from this machine only."""
    import ipaddress

    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """``Host`` without its port, lower case: ``[::1]:8787`` -> ``::1``."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


_TOO_DEEP = "body nests too deeply to be a Jev request"


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class StateJudge(Protocol):
    """What the server is handed: answers for one state and its questions.

    A state or questions outside the Jev protocol's shape raise ``ValueError`` (answered 400).
    """

    def answer_with_usage(self, state: Any, questions: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], Usage]: ...


class JevServer(GatedHTTPServer):
    """The HTTP server; carries the judge, the optional bearer key and the allowed hosts."""

    allow_reuse_address = True
    # socketserver's default of 5 dropped bursts of connections (their SYNs retried a second later).
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address: tuple[str, int], judge: StateJudge, api_key: str | None = None,
                 access_log: bool = False, *, allow_hosts: Iterable[str] = (), workers: int = DEFAULT_WORKERS,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.api_key = api_key or None
        self.judge = judge
        self.access_log = access_log
        super().__init__(address, _Handler, workers=workers, timeout_s=timeout_s)
        self.busy_bytes = 0  # the bodies taken and not yet answered; changed under _busy_lock
        self._busy_lock = threading.Lock()
        bound = str(self.server_address[0])
        self.allowed_hosts = frozenset(
            {*LOOPBACK_HOSTS, _host_name(address[0]), _host_name(bound), *(_host_name(h) for h in allow_hosts)}
        )

    def take_work(self, length: int) -> bool:
        """Count a body of ``length`` bytes in, when it fits beside those being judged
        (``MAX_BUSY_BYTES``) or none is; False: answer busy."""
        with self._busy_lock:
            if self.busy_bytes and self.busy_bytes + length > MAX_BUSY_BYTES:
                return False
            self.busy_bytes += length
            return True

    def give_back_work(self, length: int) -> None:
        with self._busy_lock:
            self.busy_bytes -= length

    @property
    def url(self) -> str:
        raw_host, port = self.server_address[0], self.server_address[1]
        host = raw_host.decode() if isinstance(raw_host, bytes) else str(raw_host)
        host_text = f"[{host}]" if ":" in host else host
        return f"http://{host_text}:{port}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries Content-Length
    server_version = "fast-jev"
    server: JevServer

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # read through the gate's bytes instead, so none is left in a buffer
        self.rfile = ConnectionReader(self.server.take_head(self.connection), self.connection)  # type: ignore[assignment]

    def handle(self) -> None:
        # One request per turn: a connection kept alive goes back to the gate, which hands it to
        # a worker again only once its next head has arrived whole, so a client dripping its next
        # request holds no worker.
        self.close_connection = True
        self.handle_one_request()
        if not self.close_connection:
            self.server.keep_alive(self.connection, self.rfile.unread())  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.access_log:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    def _send_json(self, status: int, payload: Any, close: bool = False, retry_after: int | None = None) -> None:
        body = js_json(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _send_error_json(self, status: int, message: str, close: bool = False, retry_after: int | None = None) -> None:
        payload: dict[str, Any] = {"error": {"message": message, "code": status}}
        if self.path.startswith(_CF_PREFIX):
            # Workers AI clients read the envelope's errors[]; plain clients read error.message
            code = 7000 if status == HTTPStatus.NOT_FOUND else status
            payload.update({"success": False, "result": None, "errors": [{"code": code, "message": message}],
                            "messages": []})
        self._send_json(status, payload, close=close, retry_after=retry_after)

    def _host_allowed(self) -> bool:
        headers = self.headers.get_all("Host") or []
        if len(headers) > 1:
            return False  # which one a proxy or the client meant is anyone's guess
        if not headers or ANY_HOST in self.server.allowed_hosts:
            return True  # no browser omits Host, so a request without one is no rebinding attack
        return _host_name(headers[0]) in self.server.allowed_hosts

    def _origin_allowed(self) -> bool:
        """A browser names the page a request comes from; a page elsewhere may POST here without
        asking first (a text/plain "simple" request), so only a loopback or allowed one is answered."""
        origin = self.headers.get("Origin")
        if origin is None or ANY_HOST in self.server.allowed_hosts:
            return True
        try:
            host = urlsplit(origin.strip()).hostname
        except ValueError:
            return False
        return host is not None and _host_name(host) in self.server.allowed_hosts

    def _refuse_host(self) -> str:
        shown = (self.headers.get("Host") or "")[:100]
        return f"Host {shown!r} is not allowed; start fast-jev serve with --allow-host to accept it"

    def _authorized(self) -> bool:
        key = self.server.api_key
        if key is None:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() not in ("", "identity"):
            raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "chunked bodies are not supported; send Content-Length")
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        try:
            length = int(raw_length)
        except ValueError:
            raise _HttpError(HTTPStatus.BAD_REQUEST, "invalid Content-Length") from None
        if length < 0:
            raise _HttpError(HTTPStatus.BAD_REQUEST, "invalid Content-Length")
        if length > MAX_BODY_BYTES:
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY_BYTES} bytes")
        # Each read waits at most the connection timeout, and the whole body gets twice that, so
        # a client dripping a byte at a time cannot hold a worker for long.
        deadline = time.monotonic() + 2 * self.server.timeout_s
        parts: list[bytes] = []
        remaining = length
        try:
            while remaining > 0:
                if time.monotonic() > deadline:
                    raise _HttpError(HTTPStatus.REQUEST_TIMEOUT, "the body did not arrive in time")
                chunk = self.rfile.read1(min(remaining, 1 << 16))
                if not chunk:
                    raise _HttpError(HTTPStatus.BAD_REQUEST, "body shorter than Content-Length")
                parts.append(chunk)
                remaining -= len(chunk)
        except TimeoutError:
            raise _HttpError(HTTPStatus.REQUEST_TIMEOUT, "the body did not arrive in time") from None
        return b"".join(parts)

    @staticmethod
    def _parse_json(body: bytes) -> Any:
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _HttpError(HTTPStatus.BAD_REQUEST, "body is not valid JSON") from None
        except RecursionError:
            raise _HttpError(HTTPStatus.BAD_REQUEST, _TOO_DEEP) from None

    def _declared_length(self) -> int | None:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return None
        return length if length >= 0 else None

    def _discard_body(self) -> bool:
        """Read and drop a body we will not use, so the connection stays usable; False if we can't."""
        length = self._declared_length()
        if length is None or length > MAX_BODY_BYTES or self.headers.get("Transfer-Encoding"):
            return False
        return len(self.rfile.read(length)) == length

    def _linger(self) -> None:
        """After a 413 or a busy 503, drain (bounded) what the client still sends, so it reads the reply
        instead of failing on a reset while writing its body."""
        remaining = min(self._declared_length() or 0, 8 * MAX_BODY_BYTES)
        try:
            self.wfile.flush()
            self.connection.settimeout(2.0)
            while remaining > 0:
                chunk = self.rfile.read1(min(remaining, 1 << 16))
                if not chunk:
                    break
                remaining -= len(chunk)
        except OSError:
            pass

    def _route_path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = self._route_path()
        if not self._host_allowed():
            self._send_error_json(HTTPStatus.FORBIDDEN, self._refuse_host())
            return
        if path == "/healthz":
            self._send_json(HTTPStatus.OK, {"ok": True})
            return
        if not self._authorized():
            self._send_error_json(HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token")
            return
        if path in ("/v1/models", "/models"):
            self._send_json(HTTPStatus.OK, {"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model",
                                                                         "owned_by": "fast-jev"}]})
            return
        if self._is_post_route(path):
            self._send_error_json(HTTPStatus.METHOD_NOT_ALLOWED, "use POST")
            return
        self._send_error_json(HTTPStatus.NOT_FOUND, "No route for that URI")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        path = self._route_path()
        try:
            if not self._host_allowed():
                self._send_error_json(HTTPStatus.FORBIDDEN, self._refuse_host(), close=True)
                return
            if not self._origin_allowed():
                shown = (self.headers.get("Origin") or "")[:100]
                self._send_error_json(HTTPStatus.FORBIDDEN, f"Origin {shown!r} is not allowed; requests come from this "
                                      "machine's pages or the hosts --allow-host names", close=True)
                return
            if not self._authorized():
                self._send_error_json(HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token",
                                      close=not self._discard_body())
                return
            if not self._is_post_route(path):
                self._send_error_json(HTTPStatus.NOT_FOUND, "No route for that URI", close=not self._discard_body())
                return
            work = min(self._declared_length() or 0, MAX_BODY_BYTES)
            if not self.server.take_work(work):
                # Answered before the body is read: the client learns at once, not at its deadline.
                busy = self.server.busy_bytes / (1024 * 1024)
                self._send_error_json(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"busy: {busy:.1f} MiB of requests are being judged and this one's "
                    f"{work / (1024 * 1024):.1f} MiB would take them past {MAX_BUSY_BYTES // (1024 * 1024)} MiB; "
                    "retry shortly, or send smaller requests",
                    close=True, retry_after=1,
                )
                self._linger()
                return
            try:
                self._answer(path)
            finally:
                self.server.give_back_work(work)
        except _HttpError as exc:
            self._send_error_json(exc.status, exc.message)
        except Exception as exc:  # noqa: BLE001 - the client gets a 500, the operator the trace
            sys.stderr.write(f"fast-jev serve: internal error on {path}: {exc!r}\n")
            self._send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error", close=True)

    def _answer(self, path: str) -> None:
        try:
            raw = self._read_body()
        except _HttpError as exc:
            # the body was not (fully) read, so this connection cannot carry another request
            self._send_error_json(exc.status, exc.message, close=True)
            if exc.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
                self._linger()
            return
        body = self._parse_json(raw)  # from here on the body is consumed: errors keep the connection
        if path in _SYSTEM_ONE_PATHS:
            self._send_json(HTTPStatus.OK, self._system_one(body))
        else:
            self._send_json(HTTPStatus.OK, self._cloudflare(path, body))

    def _is_post_route(self, path: str) -> bool:
        return path in _SYSTEM_ONE_PATHS or bool(_CF_CATALOG.match(path) or _CF_CLASSIC.match(path))

    @staticmethod
    def _validated(adapter: TypeAdapter[Any], body: Any) -> Any:
        """``body`` checked against one of ``protocol``'s request models; a 400 naming the first
        bad field (``body.state.history: Field required``) otherwise."""
        try:
            return adapter.validate_python(body)
        except ValidationError as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, first_problem(exc, "body")) from None
        except RecursionError:
            raise _HttpError(HTTPStatus.BAD_REQUEST, _TOO_DEEP) from None

    def _judge(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The answers to a validated payload's questions; the judge is handed them as they came."""
        try:
            answers, usage = self.server.judge.answer_with_usage(payload["state"], payload["questions"])
        except ValueError as exc:  # the judge's word for "not the Jev protocol's shape"
            raise _HttpError(HTTPStatus.BAD_REQUEST, str(exc)) from None
        except RecursionError:  # decoded, but nested past what walking it takes
            raise _HttpError(HTTPStatus.BAD_REQUEST, _TOO_DEEP) from None
        return {"answers": answers, "usage": {"input_tokens": usage.input_tokens,
                                              "output_tokens": usage.output_tokens}}

    def _system_one(self, body: Any) -> dict[str, Any]:
        model = self._validated(SYSTEM_ONE_ADAPTER, body).get("model")
        return {"model": model or DEFAULT_MODEL, **self._judge(body)}

    def _cloudflare(self, path: str, body: Any) -> dict[str, Any]:
        classic = _CF_CLASSIC.match(path)
        if classic:
            self._validated(PAYLOAD_ADAPTER, body)
            model, payload = classic.group(1), body
        else:
            model = self._validated(CLOUDFLARE_CATALOG_ADAPTER, body)["model"]
            payload = body["input"]
        if "jev" not in model.lower():
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"unknown model {model!r}; this server runs typesafe/jev")
        judged = self._judge(payload)
        return {"success": True, "result": {**judged, "model": model}, "errors": [], "messages": []}


def start_server(judge: StateJudge, host: str = "127.0.0.1", port: int = 8787, api_key: str | None = None,
                 access_log: bool = False, *, allow_hosts: Iterable[str] = (), workers: int = DEFAULT_WORKERS,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[JevServer, threading.Thread, str]:
    """Bind and serve on a background thread; port 0 picks a free port (the URL has the real one).

    ``allow_hosts`` adds ``Host`` names to the loopback ones and the bound address (``"*"``:
    any). Stop it with ``server.shutdown(); server.server_close()``.
    """
    server = JevServer((host, port), judge, api_key=api_key, access_log=access_log, allow_hosts=allow_hosts,
                       workers=workers, timeout_s=timeout_s)
    # a short poll keeps shutdown() (SIGTERM, tests) prompt; an idle wake-up costs nothing
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="fast-jev-serve",
                              daemon=True)
    thread.start()
    return server, thread, server.url
