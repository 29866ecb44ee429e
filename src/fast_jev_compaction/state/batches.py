"""Ask the judge batch by batch with bounded concurrency (upstream §5.3, hardening semantics)."""

from __future__ import annotations

import sys
from typing import Any, Awaitable, Callable, Sequence, TypeVar

T = TypeVar("T")


async def run_bounded(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run ``jobs`` with at most ``limit`` in flight, results in job order.

    After the first failure no queued job starts; jobs already in flight settle; then the first
    failure is raised, so a caller never sees partial output.
    """
    results: list[Any] = [None] * len(jobs)
    failures: list[BaseException] = []
    next_job = 0

    async def worker() -> None:
        nonlocal next_job
        while not failures and next_job < len(jobs):
            index = next_job
            next_job += 1
            try:
                results[index] = await jobs[index]()
            except Exception as exc:  # the first one wins; the others only stop the queue
                failures.append(exc)

    workers = max(1, min(limit, len(jobs)))
    loop_module = sys.modules.get("asyncio")
    if workers == 1 or loop_module is None or loop_module._get_running_loop() is None:
        # One at a time: a single job or a limit of 1 (no task to create), or stepped without an
        # event loop (an in-process judge, compaction.run_sync). The first failure stops the rest.
        return [await job() for job in jobs]
    import asyncio

    await asyncio.gather(*(worker() for _ in range(workers)))
    if failures:
        raise failures[0]
    return results
