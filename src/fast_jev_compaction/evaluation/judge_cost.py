"""What a remote judge costs: the tokens on the wire of successive passes over one session.

A generated working session (synthetic.work_session_lines, ~800 kB of transcript, ~200k tokens)
is compacted against ``fast-jev serve`` on 127.0.0.1 with the answer cache the hook keeps; then
the session grows by a twentieth and the first pass's output plus the new turns are compacted
again; then that output once more, unchanged. Each request body is counted as it leaves the
client, with the project's token estimator. ``fast-jev bench --jev-tokens`` prints the figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..conversation.messages import SessionMessage
from ..options import CompactOptions

FIRST_BYTES = 800_000
# How much the session grows between the first and the second pass: 44 calls, of which
# the budget policy could cut one.
GROWTH = 0.1


@dataclass
class PassCost:
    """One pass: its requests, the calls asked about and the estimated tokens of the bodies."""

    name: str
    requests: int = 0
    asked: int = 0
    tokens: int = 0
    largest: int = 0
    remembered: int = 0


@dataclass
class CostReport:
    policy: str
    messages: int
    calls: int
    transcript_bytes: int
    passes: list[PassCost] = field(default_factory=list)


def grown_session(folder: Path, first_bytes: int = FIRST_BYTES, growth: float = GROWTH) -> tuple[list[SessionMessage], list[SessionMessage], int]:
    """The first pass's messages, the turns added before the second, and the first transcript's size.

    Both are read from generated transcripts: the longer one starts with the shorter one's records
    (the same seed), all but its closing message.
    """
    from ..conversation.transcript import read_messages
    from .synthetic import work_session_lines

    paths = []
    for name, size in (("first", first_bytes), ("grown", int(first_bytes * (1 + growth)))):
        path = folder / f"work-{name}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in work_session_lines(size))
        paths.append(path)
    first, grown = read_messages(paths[0]), read_messages(paths[1])
    return first, grown[len(first) - 1 :], paths[0].stat().st_size


def measure(folder: Path, policy: str = "budget", first_bytes: int = FIRST_BYTES) -> CostReport:
    """Three passes against ``fast-jev serve`` (the embedded judge over HTTP) on 127.0.0.1."""
    import asyncio
    import json

    import httpx

    from ..compaction import compact
    from ..jev.client import JevClient
    from ..jev.server import start_server
    from ..judge.local import LocalJudge
    from ..state.answer_cache import open_answer_cache
    from ..state.tokens import estimate_tokens

    first, more, size = grown_session(folder, first_bytes)
    options = CompactOptions(policy=policy)
    cache = open_answer_cache(folder / f"data-{policy}")
    bodies: list[bytes] = []

    class Recording(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            bodies.append(request.content)
            return await super().handle_async_request(request)

    async def run(messages: Sequence[SessionMessage]) -> Any:
        async with JevClient(base_url=f"{url}/v1/systemone", transport=Recording(), retries=0) as client:
            return await compact(messages, client, options, cache)

    def one(name: str, messages: Sequence[SessionMessage]) -> Any:
        start = len(bodies)
        result = asyncio.run(run(messages))
        sizes = [estimate_tokens(body.decode("utf-8")) for body in bodies[start:]]
        asked = sum(len(json.loads(body)["questions"]) for body in bodies[start:]) // 2
        report.passes.append(PassCost(name, len(sizes), asked, sum(sizes), max(sizes, default=0), result.stats.remembered))
        return result

    server, thread, url = start_server(LocalJudge(), "127.0.0.1", 0)
    try:
        report = CostReport(policy, len(first), sum(len(m.toolUses) for m in first), size)
        pass_one = one("first", first)
        pass_two = one(f"grown {round(GROWTH * 100)} %", list(pass_one.messages) + more)
        one("same again", pass_two.messages)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        cache.close()
    return report


def render(reports: Sequence[CostReport]) -> str:
    from ..audit.table import render as table
    from ..stats import percent

    lines = []
    rows = []
    for report in reports:
        line = (
            f"a generated session of {report.transcript_bytes:,} bytes, {report.messages:,} messages, "
            f"{report.calls:,} calls; tokens of the request bodies sent to fast-jev serve"
        )
        if line not in lines:
            lines.append(line)
        base = report.passes[0].tokens if report.passes else 0
        for cost in report.passes:
            share = percent(cost.tokens / base) if base else "-"
            rows.append([report.policy, cost.name, str(cost.requests), str(cost.asked), str(cost.remembered),
                         f"{cost.tokens:,}", f"{cost.largest:,}", share])
    headers = ("policy", "pass", "requests", "asked", "remembered", "tokens", "largest", "of first")
    right = {"requests", "asked", "remembered", "tokens", "largest", "of first"}
    return "\n".join(lines) + "\n" + table(headers, rows, right)
