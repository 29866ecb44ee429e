"""The hook's judge: Jev when a key or an endpoint is configured, else the embedded one; and
the answers it remembers across passes.

Imports stay light: httpx is only imported when a Jev key is configured.
"""

from __future__ import annotations

from typing import Any, Callable

from .config import HookConfig
from .log import HookLog


def build_asker(config: HookConfig, log: HookLog) -> tuple[Any, Callable[[], Any] | None, str]:
    """The judge and an async closer; JevClient (and httpx) only when a key is configured."""
    if config.use_jev():
        from ..jev.client import JevClient

        client = JevClient(
            provider=config.provider,
            api_key=config.api_key or None,
            base_url=config.base_url or None,
            model=config.model,
            timeout_s=config.jev_timeout_seconds,
        )
        if client.warning:
            log.info(f"jev: {client.warning}")
        return client, client.aclose, "jev"
    from ..judge.local import LocalJudge

    return LocalJudge(), None, "local"


def answer_cache(log: HookLog) -> Any:
    """The judge's remembered answers in the data folder; a broken file only costs the memory."""
    from ..state.answer_cache import open_answer_cache

    if log.directory is None:  # no data folder to remember answers in
        return None
    try:
        return open_answer_cache(log.directory)
    except Exception as exc:  # sqlite3.Error, OSError: compact without it
        log.info(f"answer cache unavailable: {exc}")
        return None
