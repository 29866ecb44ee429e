"""``fast-jev serve``: a real subprocess answering real HTTP requests with the LocalJudge."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from fast_jev_compaction.textutil import js_json

SRC = Path(__file__).resolve().parents[1] / "src"

STATE: dict[str, Any] = {
    "context": "A coding assistant conversation is being compacted to free context.",
    "goal": "Fix the parser bug in parser.py",
    "history": [
        {"i": 0, "role": "user", "text": "Fix the parser bug in parser.py"},
        {"i": 1, "role": "assistant", "text": "Reading it.", "tool_calls": [
            {"id": "t1", "tool": "Read", "input": '{"file_path":"/repo/parser.py"}', "result": "ok, 8200 chars (omitted)"},
        ]},
        {"i": 3, "role": "assistant", "text": "", "tool_calls": [
            "t2 Bash command=pytest -q \u2192 error 2300ch",
            "t3 Bash command=git push origin main \u2192 ok 140ch",
        ]},
    ],
}


def _questions(*pairs: tuple[str, str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cid, tool, chars in pairs:
        out[f"call_{cid}"] = {"type": "noul", "instructions": f"Tool call {cid} ({tool}) should stay in the history"}
        out[f"result_{cid}"] = {"type": "noul",
                                "instructions": f"The full output of tool call {cid} ({tool}, {chars} chars) should stay"}
    return out


QUESTIONS = _questions(("t1", "Read", 8200), ("t2", "Bash", 2300), ("t3", "Bash", 140))


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url


def _spawn(*extra: str, env: dict[str, str] | None = None) -> Served:
    environment = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    environment.pop("FAST_JEV_SERVE_KEY", None)
    environment.pop("FAST_JEV_SERVE_TOKEN", None)
    environment.update(env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "fast_jev_compaction.cli", "serve", "--host", "127.0.0.1", "--port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environment,
    )
    assert proc.stdout is not None
    # a guard against a hung start, not a speed requirement
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=60):
            proc.kill()
            pytest.fail("serve printed nothing")
    first = proc.stdout.readline()
    assert first.startswith("listening on http://127.0.0.1:"), first
    url = first.split("listening on ", 1)[1].split(";", 1)[0]
    assert first == f"listening on {url}; compact with --jev-url {url}/v1/systemone\n"
    assert int(urlsplit(url).port or 0) > 0
    return Served(proc, url)


def _stop(served: Served, sig: int = signal.SIGTERM) -> int:
    if served.proc.poll() is None:
        served.proc.send_signal(sig)
    try:
        return served.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        served.proc.kill()
        served.proc.wait()
        raise


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    served = _spawn()
    try:
        yield served
    finally:
        _stop(served)


@pytest.fixture(scope="module")
def client(server: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def test_prints_exactly_one_line_and_stops_cleanly_on_sigterm_and_sigint() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        served = _spawn()
        assert httpx.get(f"{served.url}/healthz", timeout=30).status_code == 200
        assert _stop(served, sig) == 0
        assert served.proc.stdout is not None
        assert served.proc.stdout.read() == ""  # nothing after the listening line


def test_systemone_answers_every_question_with_usage(client: httpx.Client) -> None:
    r = client.post("/v1/systemone", json={"model": "jev-1.13", "state": STATE, "questions": QUESTIONS})
    assert r.status_code == 200
    body = r.json()
    assert body["model"] == "jev-1.13"
    assert set(body["answers"]) == set(QUESTIONS)
    for answer in body["answers"].values():
        assert answer["type"] == "noul" and 0 <= answer["noul"] <= 1
    assert body["usage"]["output_tokens"] == len(QUESTIONS)
    assert body["usage"]["input_tokens"] > 0
    # the push is a side effect: its call stays (the fitted model's floor for its kind)
    assert body["answers"]["call_t3"]["noul"] >= 0.9
    assert body["answers"]["call_t3"]["noul"] > body["answers"]["result_t3"]["noul"]


def test_model_defaults_and_answers_match_the_in_process_judge(client: httpx.Client) -> None:
    from fast_jev_compaction.judge import LocalJudge

    r = client.post("/v1/systemone", content=js_json({"state": STATE, "questions": QUESTIONS}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["model"] == "jev-latest"
    assert r.json()["answers"] == LocalJudge().answer(STATE, QUESTIONS)


def test_openrouter_route(client: httpx.Client) -> None:
    r = client.post("/api/alpha/decisions",
                    json={"model": "~typesafe/jev-latest", "state": STATE, "questions": QUESTIONS})
    assert r.status_code == 200
    assert r.json()["model"] == "~typesafe/jev-latest"
    assert set(r.json()["answers"]) == set(QUESTIONS)


def test_cloudflare_catalog_and_classic_forms(client: httpx.Client) -> None:
    catalog = client.post("/client/v4/accounts/acc123/ai/run",
                          json={"model": "typesafe/jev", "input": {"state": STATE, "questions": QUESTIONS}})
    classic = client.post("/client/v4/accounts/acc123/ai/run/typesafe/jev",
                          json={"state": STATE, "questions": QUESTIONS})
    for r in (catalog, classic):
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True and body["errors"] == [] and body["messages"] == []
        assert set(body["result"]["answers"]) == set(QUESTIONS)
        assert body["result"]["usage"]["output_tokens"] == len(QUESTIONS)
    assert catalog.json()["result"]["answers"] == classic.json()["result"]["answers"]


def test_cloudflare_errors_use_the_envelope(client: httpx.Client) -> None:
    r = client.post("/client/v4/accounts/acc123/ai/run", json={"model": "typesafe/jev"})
    assert r.status_code == 400
    body = r.json()
    assert body["success"] is False and body["errors"][0]["message"]
    assert body["error"]["message"]


def test_models_and_health(client: httpx.Client) -> None:
    assert client.get("/healthz").status_code == 200
    models = client.get("/v1/models")
    assert models.status_code == 200
    assert {"id": "jev-latest"}.items() <= models.json()["data"][0].items()


@pytest.mark.parametrize(
    "payload",
    [
        b"{not json",
        b"[]",
        js_json({"questions": QUESTIONS}).encode(),
        js_json({"state": STATE}).encode(),
        js_json({"state": "just words", "questions": QUESTIONS}).encode(),
        js_json({"state": {"history": "no"}, "questions": QUESTIONS}).encode(),
        js_json({"state": STATE, "questions": {}}).encode(),
        js_json({"state": STATE, "questions": {"q": {"type": "choice", "instructions": "x"}}}).encode(),
        js_json({"state": STATE, "questions": {"q": {"type": "noul", "instructions": 3}}}).encode(),
        js_json({"model": 5, "state": STATE, "questions": QUESTIONS}).encode(),
    ],
)
def test_bad_bodies_get_400_with_a_json_error(client: httpx.Client, payload: bytes) -> None:
    r = client.post("/v1/systemone", content=payload, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert isinstance(r.json()["error"]["message"], str) and r.json()["error"]["message"]


def test_unknown_path_is_404(client: httpx.Client) -> None:
    assert client.post("/v2/elsewhere", json={}).status_code == 404
    assert client.get("/nothing/here").status_code == 404
    assert "error" in client.get("/nothing/here").json()


def test_connection_is_reused_after_errors(client: httpx.Client) -> None:
    bad = client.post("/v1/systemone", content=b"{", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert bad.headers.get("connection", "").lower() != "close"  # the body was read: keep-alive holds
    r = client.post("/v1/systemone", json={"state": STATE, "questions": QUESTIONS})
    assert r.status_code == 200


def test_body_over_8_mib_is_413(server: Served) -> None:
    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {8 * 1024 * 1024 + 1}\r\n\r\n".encode()
        )
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = sock.recv(4096)
            if not chunk:
                break
            response += chunk
    assert response.startswith(b"HTTP/1.1 413")
    assert b"connection: close" in response.lower()  # the unread body makes the connection unusable


def test_api_key_is_enforced() -> None:
    served = _spawn("--api-key", "s3cret")
    try:
        with httpx.Client(base_url=served.url, timeout=30) as c:
            body = {"state": STATE, "questions": QUESTIONS}
            missing = c.post("/v1/systemone", json=body)
            wrong = c.post("/v1/systemone", json=body, headers={"Authorization": "Bearer nope"})
            basic = c.post("/v1/systemone", json=body, headers={"Authorization": "Basic s3cret"})
            for r in (missing, wrong, basic):
                assert r.status_code == 401
                assert r.json()["error"]["message"]
            assert c.get("/v1/models").status_code == 401
            ok = c.post("/v1/systemone", json=body, headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200 and set(ok.json()["answers"]) == set(QUESTIONS)
            assert c.get("/healthz").status_code == 200  # liveness needs no key
    finally:
        assert _stop(served) == 0


def test_api_key_from_environment() -> None:
    served = _spawn(env={"FAST_JEV_SERVE_KEY": "from-env"})
    try:
        body = {"state": STATE, "questions": QUESTIONS}
        assert httpx.post(f"{served.url}/v1/systemone", json=body, timeout=30).status_code == 401
        ok = httpx.post(f"{served.url}/v1/systemone", json=body, headers={"Authorization": "Bearer from-env"},
                        timeout=30)
        assert ok.status_code == 200
    finally:
        _stop(served)


def test_start_server_in_process() -> None:
    from fast_jev_compaction.jev.server import start_server
    from fast_jev_compaction.judge.local import LocalJudge

    server, thread, url = start_server(LocalJudge(), "127.0.0.1", 0)
    try:
        assert url == f"http://127.0.0.1:{server.server_address[1]}"
        r = httpx.post(f"{url}/v1/systemone", json={"state": STATE, "questions": QUESTIONS}, timeout=30)
        assert r.status_code == 200 and set(r.json()["answers"]) == set(QUESTIONS)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not thread.is_alive()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"state": {"history": "no"}, "questions": QUESTIONS}, "body.state.history: Input should be a valid list"),
        ({"questions": QUESTIONS}, "body.state: Field required"),
        ({"state": STATE, "questions": {"q": {"type": "noul", "instructions": 3}}}, "body.questions.q.instructions: Input should be a valid string"),
        ({"model": 5, "state": STATE, "questions": QUESTIONS}, "body.model: Input should be a valid string"),
    ],
)
def test_a_bad_body_is_named_by_its_field(client: httpx.Client, body: Any, message: str) -> None:
    r = client.post("/v1/systemone", json=body)
    assert (r.status_code, r.json()["error"]["message"]) == (400, message)
