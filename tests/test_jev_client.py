"""The Jev client side: wire format, answer validation, providers, and JevClient over real HTTP.

Fault cases run against ``jev_fault_server`` (a real stdlib server on 127.0.0.1); the happy path
also runs against ``fast-jev serve`` when that module exists.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fast_jev_compaction.errors import (
    JevConfigError,
    JevRequestError,
    JevResponseError,
    JevTimeoutError,
    JevTransportError,
    explain,
)
from fast_jev_compaction.jev import parse_cloudflare_response, parse_response, resolve_endpoint
from fast_jev_compaction.jev.client import JevClient
from fast_jev_compaction.jev.providers import OPENROUTER_URL, SYSTEM_ONE_URL, cleartext_warning
from fast_jev_compaction.jev.wire import build_body, build_cloudflare_body, hint_for_status
from fast_jev_compaction.state.answers import read_noul_answers, read_usage
from fast_jev_compaction.state.asker import AskResult, JevAsker, Usage
from fast_jev_compaction.textutil import js_json
from jev_fault_server import FaultServer, Reply, Seen, answers_body

STATE: dict[str, Any] = {
    "context": "A coding session; decide what the agent still needs.",
    "goal": "fix the failing parser test",
    "history": [
        {"i": 0, "role": "user", "text": "the parser test fails, fix it"},
        {
            "i": 1,
            "role": "assistant",
            "text": "Reading the parser.",
            "tool_calls": [
                {
                    "id": "t1",
                    "tool": "Read",
                    "input": '{"file_path":"/repo/parser.py"}',
                    "result": "ok, 5400 chars (omitted)",
                },
                {"id": "t2", "tool": "Bash", "input": '{"command":"ls"}', "result": "ok, 80 chars (omitted)"},
            ],
        },
        {"i": 3, "role": "assistant", "text": "The bug is in tokenize(); fixed."},
    ],
}
QUESTIONS: dict[str, Any] = {
    name: {"type": "noul", "instructions": f"Is {name} still needed verbatim?"}
    for name in ("call_t1", "result_t1", "call_t2", "result_t2")
}
NAMES = list(QUESTIONS)
FAST_DELAY = 0.001  # real retries, negligible waits


def ask(client: JevClient, state: Any = STATE, questions: Mapping[str, Any] = QUESTIONS) -> AskResult:
    """Run one ask on a fresh event loop and close the client's connections afterwards."""

    async def go() -> AskResult:
        async with client:
            return await client.ask(state, questions)

    return asyncio.run(go())


def failure(client: JevClient, kind: type[BaseException]) -> Any:
    with pytest.raises(kind) as info:
        ask(client)
    return info.value


def system_one(server: FaultServer, **options: Any) -> JevClient:
    options.setdefault("api_key", "k")
    return JevClient(base_url=f"{server.url}/v1/systemone", env={}, retry_delay_s=FAST_DELAY, **options)


def ok(value: float = 0.75, usage: dict[str, Any] | None = None) -> Reply:
    return Reply(body=answers_body(NAMES, value, usage))


# ---------------------------------------------------------------- request shape


def test_request_targets_the_endpoint_with_bearer_key_and_ordered_body() -> None:
    with FaultServer([ok(0.25, {"input_tokens": 120, "output_tokens": 8})]) as server:
        result = ask(system_one(server))
    [seen] = server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/systemone")
    assert seen.headers["authorization"] == "Bearer k"
    assert seen.headers["content-type"] == "application/json"
    # Key order matters to upstream-compatible servers and to byte-exact caching.
    assert list(json.loads(seen.body)) == ["model", "state", "questions"]
    assert seen.body.decode() == js_json({"model": "jev-latest", "state": STATE, "questions": QUESTIONS})
    assert read_noul_answers(result.answers, NAMES) == {n: 0.25 for n in NAMES}
    assert result.usage == Usage(120, 8)
    assert result.retries == 0


def test_custom_model_and_env_key_are_forwarded() -> None:
    with FaultServer([ok()]) as server:
        ask(JevClient(base_url=f"{server.url}/v1/systemone", model="jev-x", env={"TYPESAFE_API_KEY": "env-key"}))
    [seen] = server.requests
    assert seen.json()["model"] == "jev-x"
    assert seen.headers["authorization"] == "Bearer env-key"


def test_one_client_serves_several_asks_and_usage_sums() -> None:
    replies = [
        ok(0.1, {"input_tokens": 100, "output_tokens": 4}),
        ok(0.9, {"input_tokens": 50, "output_tokens": 2}),
    ]
    with FaultServer(replies) as server:
        client = system_one(server)

        async def go() -> list[AskResult]:
            async with client:
                return [await client.ask(STATE, QUESTIONS), await client.ask(STATE, QUESTIONS)]

        results = asyncio.run(go())
    total = Usage()
    for result in results:
        total.add(result.usage)
    assert total == Usage(150, 6)
    assert [read_noul_answers(r.answers, NAMES)["call_t1"] for r in results] == [0.1, 0.9]
    assert len(server.requests) == 2


def test_client_is_a_jev_asker() -> None:
    assert isinstance(JevClient(api_key="k", env={}), JevAsker)


def test_missing_key_raises_config_error_before_any_request() -> None:
    error = failure(JevClient(env={}), JevConfigError)
    assert explain(error) == (
        "TYPESAFE_API_KEY is not configured; set it or --api-key, or use the embedded judge (--judge local)"
    )
    assert explain(error, "plugin") == (
        "TYPESAFE_API_KEY is not configured; set it or the apiKey option, "
        "or use the embedded judge (the judge option set to local)"
    )


def test_a_loopback_endpoint_needs_no_key_and_gets_no_authorization_header() -> None:
    with FaultServer([ok()]) as server:
        ask(system_one(server, api_key=""))
    [seen] = server.requests
    assert "authorization" not in seen.headers


def test_a_key_over_plain_http_to_another_host_is_refused() -> None:
    error = failure(JevClient(api_key="sk-secret", base_url="http://gateway.example.com/v1/systemone", env={}), JevConfigError)
    assert explain(error) == (
        "refusing to send the Jev key over plain http to gateway.example.com; "
        "use an https URL in --jev-url, or a loopback one"
    )


# ---------------------------------------------------------------- status codes and retries


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (401, "check the API key (--api-key or TYPESAFE_API_KEY)"),
        (402, "the account has no credit left; top it up or use the embedded judge (--judge local)"),
        (403, "the key may not use this model or endpoint; check --model and --jev-url"),
        (404, "check the endpoint URL (--jev-url)"),
        (400, ""),
    ],
)
def test_client_errors_are_not_retried_and_carry_a_hint(status: int, hint: str) -> None:
    with FaultServer([Reply(status=status, body='{"error":"nope"}'), ok()]) as server:
        error = failure(system_one(server), JevRequestError)
    assert len(server.requests) == 1
    assert error.status == status
    assert not error.retryable
    assert error.retries == 0
    assert str(error) == f"Jev request failed ({status}): " + '{"error":"nope"}'
    assert explain(error) == str(error) + (f"; {hint}" if hint else "")


@pytest.mark.parametrize("statuses", [[429], [503, 503], [502, 429]])
def test_transient_statuses_are_retried_then_succeed(statuses: list[int]) -> None:
    script = [Reply(status=s, body="busy") for s in statuses] + [ok()]
    with FaultServer(script) as server:
        result = ask(system_one(server))
    assert result.retries == len(statuses)
    assert len(server.requests) == len(statuses) + 1
    # Each retry resends the identical body.
    assert len({seen.body for seen in server.requests}) == 1


def test_retries_exhausted_raise_the_last_typed_error_with_count() -> None:
    script = [Reply(status=503, body="down"), Reply(status=502), Reply(status=429, body="slow down")]
    with FaultServer(script) as server:
        error = failure(system_one(server), JevRequestError)
    assert len(server.requests) == 3  # default retries=2
    assert error.status == 429
    assert error.retries == 2
    assert error.retryable
    assert "rate limited after retries; lower --max-concurrent-requests" in explain(error)


def test_retries_option_bounds_the_attempts() -> None:
    with FaultServer([Reply(status=500, body="boom")]) as server:
        error = failure(system_one(server, retries=0), JevRequestError)
    assert len(server.requests) == 1
    assert error.retries == 0
    assert "the Jev service failed after retries" in explain(error)


def test_unreadable_error_body_still_reports_its_status() -> None:
    with FaultServer([Reply(status=401, body="x" * 40, cut=True)]) as server:
        error = failure(system_one(server), JevRequestError)
    assert error.status == 401
    assert len(server.requests) == 1


def test_body_cut_short_on_success_is_a_retryable_transport_error() -> None:
    with FaultServer([Reply(body=answers_body(NAMES), cut=True), ok(0.5)]) as server:
        result = ask(system_one(server))
    assert result.retries == 1
    assert read_noul_answers(result.answers, NAMES)["result_t2"] == 0.5


# ---------------------------------------------------------------- malformed bodies


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "Jev returned malformed JSON"),
        ('{"answers": {"call_t1": ', "Jev returned malformed JSON"),
        ("{}", "Jev response is missing answers"),
        ('{"answers": []}', "Jev response is missing answers"),
        ('{"answers": null}', "Jev response is missing answers"),
        ("[]", "Jev response is missing answers"),
        ('"answers"', "Jev response is missing answers"),
    ],
)
def test_malformed_responses_are_rejected_without_retry(body: str, message: str) -> None:
    with FaultServer([Reply(body=body), ok()]) as server:
        error = failure(system_one(server), JevResponseError)
    assert str(error) == message
    assert not error.retryable
    assert len(server.requests) == 1


def test_empty_answers_object_is_accepted_by_the_parser() -> None:
    assert parse_response(200, '{"answers":{}}') == ({}, Usage())
    with FaultServer([Reply(body='{"answers":{}}')]) as server:
        result = ask(system_one(server))
    assert result.answers == {}
    # ... and then the core's validation names every question it did not get.
    with pytest.raises(JevResponseError) as info:
        read_noul_answers(result.answers, NAMES)
    assert info.value.names == NAMES


def test_invalid_answer_values_from_the_wire_are_caught_by_validation() -> None:
    body = (
        '{"answers":{"call_t1":{"noul":NaN},"result_t1":{"type":"noul","noul":1},'
        '"call_t2":{"noul":0},"result_t2":{"noul":1.01}}}'
    )
    with FaultServer([Reply(body=body)]) as server:
        result = ask(system_one(server))
    with pytest.raises(JevResponseError, match=r"^Invalid Jev answer for call_t1, result_t2$"):
        read_noul_answers(result.answers, NAMES)


# ---------------------------------------------------------------- read_noul_answers / read_usage


BAD_ANSWERS: list[Any] = [
    {"type": "noul", "noul": -1},
    {"type": "noul", "noul": 1.01},
    {"type": "noul", "noul": math.nan},
    {"type": "noul", "noul": math.inf},
    {"noul": -math.inf},
    {"type": "noul", "noul": "x"},
    {"type": "noul", "noul": "0.5"},
    {"type": "noul", "noul": True},
    {"type": "noul", "noul": None},
    {"type": "noul", "noul": [0.5]},
    {"type": "choice", "noul": 0},
    {"type": "noul"},
    [0.5],
    None,
    0.5,
    "0.5",
]


@pytest.mark.parametrize("answer", BAD_ANSWERS, ids=repr)
def test_each_invalid_answer_shape_is_rejected(answer: Any) -> None:
    answers = {"call_t1": {"noul": 0.5}, "result_t1": answer}
    with pytest.raises(JevResponseError) as info:
        read_noul_answers(answers, ["call_t1", "result_t1"])
    assert str(info.value) == "Invalid Jev answer for result_t1"
    assert info.value.names == ["result_t1"]


def test_every_bad_name_is_listed_in_question_order() -> None:
    names = ["call_t1", "result_t1", "call_t2", "result_t2", "call_t3", "result_t3"]
    answers = {
        "result_t3": {"noul": 2},  # out of range
        "call_t1": {"type": "noul", "noul": 0.4},
        "result_t1": {"type": "choice", "noul": 0.4},
        "call_t2": [],  # array
        # result_t2 missing
        "call_t3": {"noul": 1},
    }
    with pytest.raises(JevResponseError) as info:
        read_noul_answers(answers, names)
    assert str(info.value) == "Invalid Jev answer for result_t1, call_t2, result_t2, result_t3"
    assert info.value.names == ["result_t1", "call_t2", "result_t2", "result_t3"]


def test_boundaries_and_missing_type_are_accepted() -> None:
    answers = {
        "a": {"type": "noul", "noul": 0},
        "b": {"noul": 1},
        "c": {"noul": 1.0},
        "d": {"noul": 0.5, "extra": 1},
    }
    assert read_noul_answers(answers, ["a", "b", "c", "d"]) == {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.5}
    # Extra answers the caller did not ask about are ignored, not an error.
    assert read_noul_answers({"a": {"noul": 0.2}, "zzz": None}, ["a"]) == {"a": 0.2}


@pytest.mark.parametrize("answers", [[], [{"noul": 0.5}], None, "answers", 3])
def test_answers_that_are_not_an_object_are_missing(answers: Any) -> None:
    with pytest.raises(JevResponseError, match="^Jev response is missing answers$"):
        read_noul_answers(answers, ["a"])


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_noul_is_accepted_exactly_when_finite_and_within_unit_interval(value: float) -> None:
    answers = {"q": {"type": "noul", "noul": value}}
    if math.isfinite(value) and 0 <= value <= 1:
        assert read_noul_answers(answers, ["q"]) == {"q": value}
    else:
        with pytest.raises(JevResponseError):
            read_noul_answers(answers, ["q"])


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input_tokens": 10, "output_tokens": 3}, Usage(10, 3)),
        ({"input_tokens": 10}, Usage(10, 0)),
        ({"input_tokens": -5, "output_tokens": 2.5}, Usage(0, 0)),
        ({"input_tokens": True, "output_tokens": "7"}, Usage(0, 0)),
        (None, Usage()),
        ([1, 2], Usage()),
    ],
)
def test_read_usage_is_tolerant(usage: Any, expected: Usage) -> None:
    assert read_usage(usage) == expected


def test_malformed_usage_never_fails_a_response() -> None:
    assert parse_response(200, '{"answers":{},"usage":"lots"}') == ({}, Usage())


# ---------------------------------------------------------------- deadline and transport


def test_stalled_headers_time_out() -> None:
    with FaultServer([Reply(delay_s=30, body=answers_body(NAMES))]) as server:
        error = failure(system_one(server, timeout_s=0.2, retries=0), JevTimeoutError)
    assert re.fullmatch(r"Jev request timed out after 200 ms", str(error))
    assert error.retryable


def test_stalled_body_after_headers_times_out() -> None:
    # The headers arrive at once; only the body read can hit the deadline here.
    with FaultServer([Reply(stall_s=30, body=answers_body(NAMES))]) as server:
        error = failure(system_one(server, timeout_s=0.2, retries=0), JevTimeoutError)
    assert "timed out" in str(error)
    assert len(server.requests) == 1


def test_a_timeout_is_retried() -> None:
    with FaultServer([Reply(stall_s=30, body=answers_body(NAMES)), ok(0.3)]) as server:
        result = ask(system_one(server, timeout_s=0.3))
    assert result.retries == 1
    assert read_noul_answers(result.answers, NAMES)["call_t1"] == 0.3


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_a_transport_error_after_retries() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1/systemone"
    client = JevClient(api_key="k", base_url=url, env={}, retry_delay_s=FAST_DELAY)
    error = failure(client, JevTransportError)
    assert not isinstance(error, JevTimeoutError)
    assert error.retryable
    assert error.retries == 2
    assert str(error).startswith("Jev transport failed: cannot reach http://127.0.0.1:")


@pytest.mark.parametrize("url", ["http://[::1", "ftp://example.com/v1", "not a url"])
def test_unusable_url_is_not_retried(url: str) -> None:
    error = failure(JevClient(api_key="k", base_url=url, env={}, retry_delay_s=FAST_DELAY), JevTransportError)
    assert not error.retryable
    assert error.retries == 0
    assert "check the endpoint URL" in str(error)


@pytest.mark.parametrize("value", [0, -1, -0.5, math.nan, math.inf, -math.inf, True, "15", None])
def test_invalid_timeouts_are_rejected(value: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        JevClient(api_key="k", env={}, timeout_s=value)


@pytest.mark.parametrize(("option", "value"), [("retries", -1), ("retries", 1.5), ("retry_delay_s", -0.1)])
def test_invalid_retry_options_are_rejected(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        JevClient(api_key="k", env={}, **{option: value})


# ---------------------------------------------------------------- providers


def test_default_provider_is_system_one() -> None:
    endpoint = resolve_endpoint(env={"TYPESAFE_API_KEY": "ts-key"})
    assert (endpoint.provider, endpoint.url, endpoint.model, endpoint.api_key) == (
        "systemone",
        SYSTEM_ONE_URL,
        "jev-latest",
        "ts-key",
    )
    assert endpoint.problem is None and endpoint.warning is None


@pytest.mark.parametrize(
    ("model", "mapped"),
    [
        (None, "~typesafe/jev-latest"),
        ("jev-latest", "~typesafe/jev-latest"),
        ("jev-1.13", "typesafe/jev-1.13"),
        ("acme/jev-9", "acme/jev-9"),
    ],
)
def test_openrouter_key_routes_to_openrouter_with_mapped_model(model: str | None, mapped: str) -> None:
    endpoint = resolve_endpoint(api_key="sk-or-v1-abc", model=model, env={})
    assert (endpoint.provider, endpoint.url, endpoint.model) == ("openrouter", OPENROUTER_URL, mapped)


def test_openrouter_env_key_is_used_only_when_openrouter_is_chosen() -> None:
    alone = resolve_endpoint(env={"OPENROUTER_API_KEY": "or-key"})
    assert (alone.provider, alone.api_key, alone.problem) == ("systemone", "", "TYPESAFE_API_KEY is not configured")
    chosen = resolve_endpoint(provider="openrouter", env={"OPENROUTER_API_KEY": "or-key"})
    assert (chosen.provider, chosen.api_key) == ("openrouter", "or-key")
    both = resolve_endpoint(env={"OPENROUTER_API_KEY": "or-key", "TYPESAFE_API_KEY": "ts-key"})
    assert (both.provider, both.api_key) == ("systemone", "ts-key")


def test_openrouter_request_through_a_forced_base_url() -> None:
    with FaultServer([ok()]) as server:
        ask(JevClient(api_key="sk-or-v1-abc", base_url=f"{server.url}/api/alpha/decisions", env={}))
    [seen] = server.requests
    assert seen.path == "/api/alpha/decisions"
    assert seen.headers["authorization"] == "Bearer sk-or-v1-abc"
    assert seen.json()["model"] == "~typesafe/jev-latest"


def test_cleartext_warning_only_for_plain_http_to_other_hosts() -> None:
    assert cleartext_warning("http://gateway.example.com/v1") == (
        "baseUrl http://gateway.example.com/v1 is not https; the key travels in cleartext"
    )
    quiet = ("https://gateway.example.com/v1", "http://127.0.0.1:8080/v1", "http://localhost/v1", "http://[::1]:9/x")
    for url in quiet:
        assert cleartext_warning(url) is None
    assert JevClient(api_key="k", base_url="http://10.0.0.2/v1", env={}).warning is not None


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(JevConfigError, match="unknown Jev provider"):
        JevClient(provider="bedrock", api_key="k", env={})


def test_hints_are_actionable() -> None:
    assert hint_for_status(401) == "check the API key (--api-key or TYPESAFE_API_KEY)"
    assert hint_for_status(503) == "the Jev service failed after retries; try again later or use the embedded judge (--judge local)"
    assert hint_for_status(418) == ""


# ---------------------------------------------------------------- cloudflare

CF_ENV = {"CLOUDFLARE_ACCOUNT_ID": "acc123", "CLOUDFLARE_API_TOKEN": "cf-token"}
CF_RUN = "/client/v4/accounts/acc123/ai/run"
NO_ROUTE = {"success": False, "errors": [{"code": 7000, "message": "No route for that URI"}], "result": None}


def envelope(value: float = 0.6) -> dict[str, Any]:
    body = answers_body(NAMES, value, {"input_tokens": 40, "output_tokens": 1})
    return {"success": True, "errors": [], "messages": [], "result": body}


def cloudflare_routes(catalog: Reply, classic: Reply) -> Any:
    def route(seen: Seen) -> Reply:
        if seen.path == CF_RUN:
            return catalog
        if seen.path == f"{CF_RUN}/typesafe/jev":
            return classic
        return Reply(status=404, body=NO_ROUTE)

    return route


def cloudflare(server: FaultServer, **options: Any) -> JevClient:
    return JevClient(provider="cloudflare", base_url=server.url, env=CF_ENV, retry_delay_s=FAST_DELAY, **options)


@pytest.mark.parametrize("no_route", [Reply(status=404, body=NO_ROUTE), Reply(status=400, body=NO_ROUTE)])
def test_cloudflare_falls_back_to_the_classic_form_and_remembers_it(no_route: Reply) -> None:
    with FaultServer(cloudflare_routes(no_route, Reply(body=envelope()))) as server:
        client = cloudflare(server)

        async def go() -> list[AskResult]:
            async with client:
                return [await client.ask(STATE, QUESTIONS), await client.ask(STATE, QUESTIONS)]

        first, second = asyncio.run(go())
    paths = [seen.path for seen in server.requests]
    # Probe catalog, fall back to classic; the second ask goes straight to classic.
    assert paths == [CF_RUN, f"{CF_RUN}/typesafe/jev", f"{CF_RUN}/typesafe/jev"]
    assert server.requests[0].json() == {"model": "typesafe/jev", "input": {"state": STATE, "questions": QUESTIONS}}
    assert list(server.requests[1].json()) == ["state", "questions"]
    assert all(seen.headers["authorization"] == "Bearer cf-token" for seen in server.requests)
    assert client.cloudflare_form == "classic"
    for result in (first, second):
        assert read_noul_answers(result.answers, NAMES)["call_t2"] == 0.6
        assert result.usage == Usage(40, 1)
        assert result.retries == 0


def test_cloudflare_catalog_form_is_used_when_it_answers() -> None:
    with FaultServer(cloudflare_routes(Reply(body=envelope(0.2)), Reply(status=500))) as server:
        result = ask(client := cloudflare(server))
    assert [seen.path for seen in server.requests] == [CF_RUN]
    assert client.cloudflare_form == "catalog"
    assert read_noul_answers(result.answers, NAMES)["result_t1"] == 0.2


def test_cloudflare_other_errors_do_not_trigger_the_fallback() -> None:
    with FaultServer(cloudflare_routes(Reply(status=401, body='{"success":false}'), Reply(body=envelope()))) as server:
        error = failure(cloudflare(server), JevRequestError)
    assert [seen.path for seen in server.requests] == [CF_RUN]
    assert "CLOUDFLARE_API_TOKEN" in explain(error)


def test_cloudflare_without_account_id_is_a_config_error() -> None:
    with pytest.raises(JevConfigError, match="CLOUDFLARE_ACCOUNT_ID"):
        ask(JevClient(provider="cloudflare", env={"CLOUDFLARE_API_TOKEN": "t"}))


def test_cloudflare_is_used_only_when_chosen() -> None:
    assert resolve_endpoint(env=CF_ENV).provider == "systemone"
    endpoint = resolve_endpoint(provider="cloudflare", env=CF_ENV)
    assert endpoint.provider == "cloudflare"
    assert endpoint.url == f"https://api.cloudflare.com{CF_RUN}"
    assert endpoint.cloudflare_url("classic") == f"https://api.cloudflare.com{CF_RUN}/typesafe/jev"


def test_cloudflare_response_shapes() -> None:
    answers = {"q": {"type": "noul", "noul": 0.5}}
    enveloped = json.dumps({"success": True, "result": {"answers": answers, "usage": {"input_tokens": 3}}})
    assert parse_cloudflare_response(200, enveloped) == (answers, Usage(3, 0))
    # A result without an ``answers`` key is the answers object itself.
    assert parse_cloudflare_response(200, json.dumps({"success": True, "result": answers}))[0] == answers
    # Some proxies strip the envelope.
    assert parse_cloudflare_response(200, json.dumps({"answers": answers}))[0] == answers
    with pytest.raises(JevResponseError, match="^Jev response is missing answers$"):
        parse_cloudflare_response(200, json.dumps({"success": True, "result": None}))
    with pytest.raises(JevResponseError, match="^Jev response is missing answers$"):
        parse_cloudflare_response(200, json.dumps({"usage": {}}))
    failed = json.dumps({"success": False, "errors": [{"code": 5006, "message": "Error: input too large"}]})
    with pytest.raises(JevResponseError, match="5006: Error: input too large"):
        parse_cloudflare_response(200, failed)


def test_cloudflare_body_forms() -> None:
    assert build_cloudflare_body("catalog", "typesafe/jev", {"s": 1}, {"q": {}}) == (
        '{"model":"typesafe/jev","input":{"state":{"s":1},"questions":{"q":{}}}}'
    )
    assert build_cloudflare_body("classic", "typesafe/jev", "text", {}) == '{"state":"text","questions":{}}'
    assert build_body("jev-latest", "s", {"q": {"type": "noul"}}) == (
        '{"model":"jev-latest","state":"s","questions":{"q":{"type":"noul"}}}'
    )


# ---------------------------------------------------------------- packaging


def test_jev_package_import_does_not_load_httpx() -> None:
    code = (
        "import sys, fast_jev_compaction.jev as j; "
        "print('httpx' in sys.modules, j.JevClient.__name__, 'httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "JevClient", "True"]


# ---------------------------------------------------------------- against `fast-jev serve`


@pytest.fixture(scope="module")
def serve_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("fast_jev_compaction.jev.server")
    # stderr goes to a file and stdout is drained by a thread: a full pipe would stall the server.
    err_path = tmp_path_factory.mktemp("serve") / "stderr.txt"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fast_jev_compaction.cli", "serve", "--host", "127.0.0.1", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # the banner must not sit in a pipe buffer
        )
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()  # EOF: the server exited without announcing itself

    threading.Thread(target=drain, daemon=True).start()
    ready.wait(timeout=30)
    try:
        if not found:
            pytest.fail(f"fast-jev serve did not print its address; stderr:\n{err_path.read_text()}")
        yield found[0]
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_serve_system_one_answers_every_question(serve_url: str) -> None:
    result = ask(JevClient(api_key="local", base_url=f"{serve_url}/v1/systemone", env={}, retry_delay_s=FAST_DELAY))
    values = read_noul_answers(result.answers, NAMES)
    assert set(values) == set(NAMES)
    assert all(0 <= v <= 1 for v in values.values())
    assert result.retries == 0
    assert result.usage.input_tokens >= 0 and result.usage.output_tokens >= 0


def test_serve_openrouter_route(serve_url: str) -> None:
    url = f"{serve_url}/api/alpha/decisions"
    result = ask(JevClient(api_key="sk-or-local", base_url=url, env={}, retry_delay_s=FAST_DELAY))
    assert set(read_noul_answers(result.answers, NAMES)) == set(NAMES)


def test_serve_cloudflare_route(serve_url: str) -> None:
    client = JevClient(
        provider="cloudflare",
        account_id="acc123",
        api_key="cf-local",
        base_url=serve_url,
        env={},
        retry_delay_s=FAST_DELAY,
    )
    result = ask(client)
    assert set(read_noul_answers(result.answers, NAMES)) == set(NAMES)
    assert client.cloudflare_form in ("catalog", "classic")


def test_serve_rejects_an_unknown_route_with_a_hint(serve_url: str) -> None:
    client = JevClient(api_key="local", base_url=f"{serve_url}/v1/nowhere", env={}, retry_delay_s=FAST_DELAY)
    error = failure(client, JevRequestError)
    assert error.status == 404
    assert "check the endpoint URL" in explain(error)
