"""``fast-jev serve`` under hostile clients: stalled connections, foreign Host headers, no token.

Regressions from issue 6: 100 stalled connections held the server, any Host was answered (DNS
rebinding), and there was no loud warning when bound beyond loopback. A real subprocess, real
sockets.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
SAFETY_S = 60  # guards against a hang, not a speed requirement
BODY = {
    "state": {"context": "c", "goal": "g", "history": [{"i": 0, "role": "user", "text": "fix the parser"}]},
    "questions": {"call_t1": {"type": "noul", "instructions": "Tool call t1 (Read) should stay in the history"}},
}


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url
        self.port = int(urlsplit(url).port or 0)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _out, err = self.proc.communicate(timeout=SAFETY_S)
        return err


def spawn(*extra: str, host: str = "127.0.0.1", env: dict[str, str] | None = None) -> Served:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("FAST_JEV_SERVE_")}
    environment["PYTHONPATH"] = f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    environment.update(env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "fast_jev_compaction.cli", "serve", "--host", host, "--port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=SAFETY_S):
            proc.kill()
            pytest.fail("serve printed nothing")
    line = proc.stdout.readline()
    assert line.startswith("listening on http://"), line
    return Served(proc, line.split("listening on ", 1)[1].split(";", 1)[0].strip())


@pytest.fixture()
def served() -> Iterator[Served]:
    s = spawn("--workers", "2", "--timeout", "30")
    try:
        yield s
    finally:
        s.stop()


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def test_a_hundred_stalled_connections_do_not_stop_a_real_request(served: Served) -> None:
    stalled: list[socket.socket] = []
    try:
        for i in range(100):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S)
            if i % 2:  # half of them send half a request, then nothing
                sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            stalled.append(sock)
        # Two workers only: were stalled clients holding workers, this would wait for the timeout.
        answer = httpx.post(f"{served.url}/v1/systemone", json=BODY, timeout=SAFETY_S)
        assert answer.status_code == 200
        assert set(answer.json()["answers"]) == {"call_t1"}
        assert all(still_open(s) for s in stalled)  # answered while every one of them still waited
    finally:
        for sock in stalled:
            sock.close()


def test_a_stalled_client_is_dropped_after_the_timeout() -> None:
    served = spawn("--timeout", "0.5")
    try:
        silent = socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S)
        partial = socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S)
        partial.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        dripping = socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S)
        dripping.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        assert silent.recv(1024) == b""  # closed by the server, no answer
        assert partial.recv(1024) == b""
        reply = dripping.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408 ")
        for sock in (silent, partial, dripping):
            sock.close()
        assert httpx.get(f"{served.url}/healthz", timeout=SAFETY_S).status_code == 200
    finally:
        served.stop()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8787", "127.0.0.1.nip.io", "192.168.1.20"])
def test_a_foreign_host_header_is_refused(served: Served, host: str) -> None:
    for method, path in (("GET", "/healthz"), ("GET", "/v1/models"), ("POST", "/v1/systemone")):
        answer = httpx.request(method, f"{served.url}{path}", json=BODY if method == "POST" else None,
                               headers={"Host": host}, timeout=SAFETY_S)
        assert answer.status_code == 403, (method, path)
        assert "--allow-host" in answer.json()["error"]["message"]


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:1234", "127.0.0.1", "[::1]:99"])
def test_loopback_host_headers_are_answered(served: Served, host: str) -> None:
    answer = httpx.post(f"{served.url}/v1/systemone", json=BODY, headers={"Host": host}, timeout=SAFETY_S)
    assert answer.status_code == 200


def test_allow_host_adds_a_name() -> None:
    served = spawn("--allow-host", "judge.internal")
    try:
        ok = httpx.get(f"{served.url}/v1/models", headers={"Host": "judge.internal:8787"}, timeout=SAFETY_S)
        other = httpx.get(f"{served.url}/v1/models", headers={"Host": "evil.example"}, timeout=SAFETY_S)
        assert (ok.status_code, other.status_code) == (200, 403)
    finally:
        served.stop()


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_token_is_required_when_set(how: str) -> None:
    served = (
        spawn("--token", "t0ken") if how == "option" else spawn(env={"FAST_JEV_SERVE_TOKEN": "t0ken"})
    )
    try:
        url = f"{served.url}/v1/systemone"
        missing = httpx.post(url, json=BODY, timeout=SAFETY_S)
        wrong = httpx.post(url, json=BODY, headers={"Authorization": "Bearer nope"}, timeout=SAFETY_S)
        right = httpx.post(url, json=BODY, headers={"Authorization": "Bearer t0ken"}, timeout=SAFETY_S)
        assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    finally:
        served.stop()


def test_binding_beyond_loopback_warns_loudly_and_loopback_does_not() -> None:
    wide = spawn(host="0.0.0.0")
    err = wide.stop()
    assert "fast-jev serve: WARNING: listening on 0.0.0.0, beyond this machine's loopback" in err
    assert "no token is set: pass --token or set FAST_JEV_SERVE_TOKEN" in err
    guarded = spawn("--token", "t", host="0.0.0.0")
    assert "(requests need the token)" in guarded.stop()
    assert spawn().stop() == ""


def test_bad_workers_or_timeout_are_usage_errors() -> None:
    for args in (["--workers", "0"], ["--timeout", "-1"], ["--timeout", "soon"]):
        proc = subprocess.run(
            [sys.executable, "-m", "fast_jev_compaction.cli", "serve", "--port", "0", *args],
            capture_output=True, text=True, timeout=SAFETY_S,
            env={**os.environ, "PYTHONPATH": str(SRC)},
        )
        assert proc.returncode == 2 and "expected a positive number" in proc.stderr


def test_the_judge_answer_is_unchanged_through_the_gate(served: Served) -> None:
    # The gate hands the bytes it read to the handler: a body sent with the head still arrives whole.
    body = json.dumps(BODY).encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S) as sock:
        sock.sendall(
            b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
        reply = b""
        deadline = time.monotonic() + SAFETY_S
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert set(json.loads(payload)["answers"]) == {"call_t1"}


def test_full_workers_and_queue_answer_503_at_once_and_recover() -> None:
    served = spawn("--workers", "1", "--timeout", "30")
    body_stalled: list[socket.socket] = []
    try:
        # A whole head and no body: each takes the worker or a queue place (1 + 4 per worker).
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S)
            sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n")
            body_stalled.append(sock)
        time.sleep(1.0)  # let the gate hand them over
        busy = httpx.post(f"{served.url}/v1/systemone", json=BODY, timeout=SAFETY_S)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        for sock in body_stalled:
            sock.close()
        body_stalled.clear()
        give_up = time.monotonic() + SAFETY_S
        while True:  # the worker frees itself as soon as the stalled bodies end
            answer = httpx.post(f"{served.url}/v1/systemone", json=BODY, timeout=SAFETY_S)
            if answer.status_code == 200 or time.monotonic() > give_up:
                break
            time.sleep(0.1)
        assert answer.status_code == 200
    finally:
        for sock in body_stalled:
            sock.close()
        served.stop()


def test_a_100000_deep_body_is_a_400_not_a_500(served: Served) -> None:
    deep = '{"state": ' + "[" * 100_000 + "]" * 100_000 + ', "questions": {}}'
    answer = httpx.post(f"{served.url}/v1/systemone", content=deep, headers={"Content-Type": "application/json"},
                        timeout=SAFETY_S)
    assert answer.status_code == 400 and "nests" in answer.json()["error"]["message"]
    assert served.stop() == ""  # nothing for the operator: the client's error, not the server's


@pytest.mark.parametrize("origin", ["http://evil.example", "https://127.0.0.1.nip.io:8443", "null"])
def test_a_post_from_a_foreign_origin_is_refused(served: Served, origin: str) -> None:
    # A page elsewhere may send a "simple" text/plain POST here without asking first; its Origin
    # says where it comes from.
    answer = httpx.post(f"{served.url}/v1/systemone", content=json.dumps(BODY),
                        headers={"Content-Type": "text/plain", "Origin": origin}, timeout=SAFETY_S)
    assert answer.status_code == 403 and "Origin" in answer.json()["error"]["message"]


def test_a_post_from_a_loopback_origin_is_answered(served: Served) -> None:
    answer = httpx.post(f"{served.url}/v1/systemone", json=BODY, headers={"Origin": "http://localhost:3000"},
                        timeout=SAFETY_S)
    assert answer.status_code == 200


def test_the_url_serve_prints_is_a_jev_url_as_it_is(served: Served, tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "session.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(example), "--jev-url", served.url,
         "--out", str(tmp_path / "o.json")],
        capture_output=True, text=True, timeout=SAFETY_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert httpx.post(served.url, json=BODY, timeout=SAFETY_S).status_code == 200


def test_the_listen_backlog_takes_a_burst(served: Served) -> None:
    listing = subprocess.run(["ss", "-ltnH", f"sport = :{served.port}"], capture_output=True, text=True)
    if listing.returncode != 0 or not listing.stdout.strip():
        pytest.skip("ss cannot show the listening socket here")
    backlog = int(listing.stdout.split()[2])  # Send-Q of a listening socket is its backlog
    assert backlog >= 128


def test_kept_alive_clients_dripping_their_next_request_hold_no_worker() -> None:
    # A timeout past the client's own guard: were the drippers holding both workers, the real
    # request would get no answer before the guard ends the test.
    served = spawn("--workers", "2", "--timeout", str(3 * SAFETY_S))
    request = json.dumps(BODY).encode()
    head = f"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(request)}\r\n\r\n".encode()
    dripping: list[socket.socket] = []
    try:
        for _ in range(4):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S)
            sock.sendall(head + request)
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                reply += sock.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200 ")
            sock.sendall(head[:20])  # the next request begins, and stops
            dripping.append(sock)
        answer = httpx.post(f"{served.url}/v1/systemone", json=BODY, timeout=SAFETY_S)
        assert answer.status_code == 200
        assert all(still_open(s) for s in dripping)  # answered while every one of them still dripped
    finally:
        for sock in dripping:
            sock.close()
        served.stop()


def test_a_kept_alive_connection_still_carries_request_after_request(served: Served) -> None:
    with httpx.Client(timeout=SAFETY_S) as client:
        for _ in range(3):
            assert client.post(f"{served.url}/v1/systemone", json=BODY).status_code == 200
        assert client.get(f"{served.url}/healthz").status_code == 200
    # Two requests in one write (pipelined): both are answered, in order.
    body = json.dumps(BODY).encode()
    one = f"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    with socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S) as sock:
        sock.sendall(one + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.count(b"HTTP/1.1 200 ") == 2 and reply.rstrip().endswith(b'{"ok":true}')


def test_a_second_host_header_is_refused(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=SAFETY_S) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 403 ")


def _large_body(mib: float) -> bytes:
    """A legal Jev request of about ``mib`` MiB: a long history and one question per call."""
    history: list[dict[str, object]] = []
    questions: dict[str, object] = {}
    n = 0
    size = 0
    while size < mib * 1024 * 1024:
        entry = {"i": n, "role": "assistant", "text": "reading " * 20, "tool_calls": [
            {"id": f"t{n}", "tool": "Read", "input": json.dumps({"file_path": f"/repo/f{n}.py"}), "result": "output " * 40}]}
        history.append(entry)
        questions[f"call_t{n}"] = {"type": "noul", "instructions": f"Tool call t{n} (Read) should stay in the history"}
        size += len(json.dumps(entry)) + 80
        n += 1
    return json.dumps({"state": {"context": "c", "goal": "g", "history": history}, "questions": questions}).encode()


def test_serve_answers_a_large_request_busy_at_once_while_another_is_judged() -> None:
    """Eight legal 3.6 MiB requests judged together kept a client ~57 s past its 15 s deadline:
    what would go past the work bound is answered 503 before its body is read, a small request
    still passes, and the large one being judged is answered."""
    import threading

    from fast_jev_compaction.jev.server import MAX_BUSY_BYTES, start_server
    from fast_jev_compaction.judge.local import LocalJudge

    judging = threading.Event()
    release = threading.Event()

    class HeldJudge(LocalJudge):
        """The embedded judge, held inside its first large request until the test lets it go."""

        def answer_with_usage(self, state, questions):  # type: ignore[no-untyped-def]
            if len(questions) > 100 and not judging.is_set():
                judging.set()
                release.wait(SAFETY_S)
            return super().answer_with_usage(state, questions)

    server, thread, url = start_server(HeldJudge(), port=0, workers=4)
    large = _large_body(3.6)
    assert len(large) <= MAX_BUSY_BYTES < 2 * len(large)
    first: dict[str, httpx.Response] = {}
    client = threading.Thread(
        target=lambda: first.update(response=httpx.post(f"{url}/v1/systemone", content=large, timeout=SAFETY_S))
    )
    try:
        client.start()
        assert judging.wait(SAFETY_S)
        busy = httpx.post(f"{url}/v1/systemone", content=large, timeout=SAFETY_S)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert busy.json()["error"]["message"].startswith(f"busy: {len(large) / 2**20:.1f} MiB of requests are being judged")
        small = httpx.post(f"{url}/v1/systemone", json=BODY, timeout=SAFETY_S)
        assert small.status_code == 200
    finally:
        release.set()
        client.join(SAFETY_S)
        server.shutdown()
        server.server_close()
        thread.join(SAFETY_S)
    assert first["response"].status_code == 200
    assert server.busy_bytes == 0
