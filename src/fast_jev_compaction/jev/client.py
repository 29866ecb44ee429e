"""``JevClient``: the Jev protocol over httpx, with a whole-request deadline and typed retries."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Mapping
from numbers import Real
from types import TracebackType
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential

from ..errors import JevConfigError, JevError, JevRequestError, JevResponseError, JevTimeoutError, JevTransportError
from ..redaction import redact_json
from ..state.asker import AskResult, Usage
from .providers import Endpoint, resolve_endpoint
from .wire import CloudflareForm, build_body, build_cloudflare_body, parse_cloudflare_response, parse_response

DEFAULT_TIMEOUT_S = 15.0
DEFAULT_RETRIES = 2
DEFAULT_RETRY_DELAY_S = 0.5
# Each wait is the previous one times this: 0.5 s then 1.5 s with the defaults.
RETRY_BACKOFF = 3
# A real answer set is a few KiB; past this the body is refused, not read whole into memory.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def _check_timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout_s must be a finite number of seconds greater than 0 (got {value!r})")
    return float(value)


def _check_retries(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"retries must be a whole number >= 0 (got {value!r})")
    return value


def _check_delay(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"retry_delay_s must be a finite number of seconds >= 0 (got {value!r})")
    return float(value)


def _is_retryable(exc: BaseException) -> bool:
    # Only typed, transient failures: a plain bug or a cancellation must surface at once.
    return isinstance(exc, JevError) and exc.retryable


def _no_route(status: int, text: str) -> bool:
    """Workers AI's answer when a route form does not exist for this account/model."""
    return status == 404 or (status == 400 and "no route" in text.lower())


class JevClient:
    """Asks Jev (System One, OpenRouter Decisions or Cloudflare Workers AI) over HTTP.

    One ``httpx.AsyncClient`` is created on first use and reused; close it with ``aclose()`` or
    ``async with`` (its pooled connections belong to the event loop that opened them, so close it
    before reusing the client from another loop). ``warning`` carries a line worth logging (a key
    sent in cleartext).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        account_id: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        retry_delay_s: float = DEFAULT_RETRY_DELAY_S,
        transport: httpx.AsyncBaseTransport | None = None,
        env: Mapping[str, str] | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        report: Callable[[str], None] | None = None,
    ) -> None:
        # ``report`` hears "retrying after 429 (1/2)…" before each wait, for a progress line.
        self._report = report
        self.timeout_s = _check_timeout(timeout_s)
        self.max_response_bytes = max_response_bytes
        self.retries = _check_retries(retries)
        self.retry_delay_s = _check_delay(retry_delay_s)
        self.endpoint: Endpoint = resolve_endpoint(
            provider=provider,
            api_key=api_key,
            base_url=base_url,
            model=model,
            account_id=account_id,
            env=os.environ if env is None else env,
        )
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        # The Workers AI route form that answered last, so later calls skip the probe.
        self._cloudflare_form: CloudflareForm | None = None
        # (state, its redacted copy): every batch of a compaction shares one state object.
        self._redacted_state: tuple[Any, Any] | None = None

    @property
    def warning(self) -> str | None:
        return self.endpoint.warning

    @property
    def cache_scope(self) -> str:
        """Whose answers the answer cache keeps apart (answer_cache.judge_scope): the provider,
        the endpoint and the model, never the key."""
        endpoint = self.endpoint
        return f"jev {endpoint.provider} {endpoint.url} {endpoint.model}"

    @property
    def cloudflare_form(self) -> CloudflareForm | None:
        return self._cloudflare_form

    async def __aenter__(self) -> JevClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            # No httpx timeout: the asyncio deadline in _post is the single authority.
            self._http = httpx.AsyncClient(timeout=None, transport=self._transport, follow_redirects=False)
        return self._http

    async def ask(self, state: Any, questions: Mapping[str, Any]) -> AskResult:
        """One request (plus retries) answering every question against ``state``.

        Raises ``JevConfigError`` before sending anything when unconfigured. A failed ask raises
        the last typed error, with ``error.retries`` set to the retries spent. Credentials in the
        state and the questions are masked first (``redaction.redact_json``): nothing secret
        leaves the process, and the body stays valid JSON.
        """
        if self.endpoint.problem:
            raise JevConfigError(self.endpoint.problem, self.endpoint.hint)
        if self._redacted_state is None or self._redacted_state[0] is not state:
            self._redacted_state = (state, redact_json(state))
        state, questions = self._redacted_state[1], redact_json(dict(questions))
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=wait_exponential(multiplier=self.retry_delay_s, exp_base=RETRY_BACKOFF, min=0),
            retry=retry_if_exception(_is_retryable),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        attempts = 0
        answers: Mapping[str, Any] = {}
        usage = Usage()
        try:
            async for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    answers, usage = await self._once(state, questions)
        except JevError as exc:
            exc.retries = max(0, attempts - 1)
            raise
        return AskResult(answers=answers, usage=usage, retries=max(0, attempts - 1))

    def _before_sleep(self, state: RetryCallState) -> None:
        if self._report is None or state.outcome is None:
            return
        exc = state.outcome.exception()
        if isinstance(exc, JevRequestError):
            what = str(exc.status)
        elif isinstance(exc, JevTimeoutError):
            what = "a timeout"
        else:
            what = "a connection error"
        self._report(f"retrying after {what} ({state.attempt_number}/{self.retries})…")

    async def _once(self, state: Any, questions: Mapping[str, Any]) -> tuple[Mapping[str, Any], Usage]:
        endpoint = self.endpoint
        if endpoint.provider != "cloudflare":
            status, text = await self._post(endpoint.url, build_body(endpoint.model, state, questions))
            return parse_response(status, text, endpoint.key_source)

        # Reports disagree on which Workers AI form exists; probe catalog then classic once.
        forms: tuple[CloudflareForm, ...] = (
            (self._cloudflare_form,) if self._cloudflare_form else ("catalog", "classic")
        )
        for index, form in enumerate(forms):
            body = build_cloudflare_body(form, endpoint.model, state, questions)
            status, text = await self._post(endpoint.cloudflare_url(form), body)
            if index + 1 < len(forms) and _no_route(status, text):
                continue
            result = parse_cloudflare_response(status, text, endpoint.key_source)
            self._cloudflare_form = form
            return result
        raise AssertionError("unreachable: the last form always returns or raises")

    async def _post(self, url: str, body: str) -> tuple[int, str]:
        """POST ``body``; the deadline covers connecting, the headers and the whole body read."""
        http = self._client()
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.endpoint.api_key:  # a loopback endpoint may go without
            headers["authorization"] = f"Bearer {self.endpoint.api_key}"
        try:
            async with asyncio.timeout(self.timeout_s):
                request = http.build_request("POST", url, content=body.encode("utf-8"), headers=headers)
                response = await http.send(request, stream=True)
                try:
                    try:
                        raw = await self._read_capped(response)
                    except httpx.TransportError:
                        if response.is_success:
                            raise
                        # The status alone is the useful part of a failed response.
                        raw = b""
                finally:
                    await response.aclose()
        except TimeoutError:
            raise JevTimeoutError(self.timeout_s) from None
        except httpx.TimeoutException:
            raise JevTimeoutError(self.timeout_s) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            # Retrying cannot fix a bad URL; say where to look.
            raise JevTransportError(f"invalid URL {url!r} ({exc}); check the endpoint URL", retryable=False) from exc
        except httpx.HTTPError as exc:
            raise JevTransportError(f"cannot reach {url} ({type(exc).__name__}: {exc})") from exc
        return response.status_code, raw.decode("utf-8", errors="replace")

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """The body, streamed; a 2xx body past ``max_response_bytes`` is a ``JevResponseError``,
        a failed one is cut there (its status is the useful part)."""
        chunks: list[bytes] = []
        received = 0
        async for chunk in response.aiter_bytes():
            received += len(chunk)
            if received > self.max_response_bytes:
                if response.is_success:
                    raise JevResponseError(
                        f"Jev sent a response body larger than {self.max_response_bytes // 1024} KiB; "
                        "check the endpoint URL"
                    )
                chunks.append(chunk[: max(0, len(chunk) - (received - self.max_response_bytes))])
                break
            chunks.append(chunk)
        return b"".join(chunks)
