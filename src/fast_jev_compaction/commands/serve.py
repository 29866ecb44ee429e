"""``fast-jev serve``: answer Jev-protocol requests over HTTP with the embedded judge."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from ..jev.connections import DEFAULT_TIMEOUT_S, DEFAULT_WORKERS

DESCRIPTION = """\
Serve the Jev wire protocol on a local port, answered offline by the embedded judge, so any Jev
client can point its base URL here. Routes: POST /v1/systemone, POST /api/alpha/decisions,
POST /client/v4/accounts/<id>/ai/run (body {"model":"typesafe/jev","input":{...}}),
POST /client/v4/accounts/<id>/ai/run/typesafe/jev, GET /v1/models, GET /healthz.
Prints one line once the port is bound: "listening on http://HOST:PORT; compact with
--jev-url http://HOST:PORT/v1/systemone", the exact URL `fast-jev compact` takes (no key needed
on a loopback address).

Requests must carry a Host header naming localhost, a loopback address or the bound address
(add others with --allow-host), so a web page cannot reach the server through DNS rebinding.
Bound beyond loopback, it warns on stderr: set a token there.
"""

TOKEN_ENV = "FAST_JEV_SERVE_TOKEN"
LEGACY_KEY_ENV = "FAST_JEV_SERVE_KEY"  # the earlier name, still read


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
        return value

    return parse


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="serve the Jev protocol locally (embedded judge)",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8787, help="port to bind, 0-65535; 0 picks a free one (default: 8787)")
    p.add_argument("--token", "--api-key", dest="token", default=None,
                   help=f"require 'Authorization: Bearer TOKEN' on every route but /healthz "
                        f"(default: ${TOKEN_ENV}; unset: no auth)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="also accept requests whose Host header names HOST (repeatable; '*' accepts any)")
    p.add_argument("--workers", type=_positive(int), default=DEFAULT_WORKERS,
                   help=f"requests handled at once (default: {DEFAULT_WORKERS})")
    p.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="drop a connection that sends nothing for this long, or whose request line and "
                        f"headers take longer (default: {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    p.set_defaults(run=run)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 0-65535, got {value}")
    return value


def jev_url(url: str) -> str:
    """The System One route on ``url``, reached over loopback when the server binds every address."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}:{parts.port}/v1/systemone"


def run(args: argparse.Namespace) -> int:
    from ..jev.server import is_loopback, start_server
    from ..judge.local import LocalJudge

    token = args.token or os.environ.get(TOKEN_ENV) or os.environ.get(LEGACY_KEY_ENV) or None
    try:
        server, thread, url = start_server(LocalJudge(), args.host, args.port, api_key=token, access_log=args.access_log,
                                           allow_hosts=args.allow_host, workers=args.workers,
                                           timeout_s=args.timeout)
    except (OSError, OverflowError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"fast-jev serve: cannot listen on {args.host}:{args.port}: {why}; choose another --port or --host",
              file=sys.stderr)
        return 1
    if not is_loopback(args.host):
        guard = "requests need the token" if token else f"no token is set: pass --token or set {TOKEN_ENV}"
        print(f"fast-jev serve: WARNING: listening on {args.host}, beyond this machine's loopback; anyone who "
              f"can reach port {server.server_address[1]} can use the judge ({guard})", file=sys.stderr, flush=True)

    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    # serve_forever runs on its own thread, so the handler only flags; shutdown() happens here
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        print(f"listening on {url}; compact with --jev-url {jev_url(url)}", flush=True)
        while not stop.wait(0.5) and thread.is_alive():
            pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
