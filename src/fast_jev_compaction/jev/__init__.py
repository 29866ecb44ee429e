"""The Jev protocol over HTTP: the client (wire format, providers, ``JevClient``) and ``fast-jev serve``.

Each name is loaded on first use: ``JevClient`` so that the wire helpers or the provider
resolution do not pay for httpx, and the wire helpers so that the hook, which only asks
``providers.wants_jev`` whether a judge is configured, does not pay for them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import JevClient
    from .providers import Endpoint, resolve_endpoint
    from .wire import build_body, hint_for_status, parse_cloudflare_response, parse_response

__all__ = [
    "Endpoint",
    "JevClient",
    "build_body",
    "hint_for_status",
    "parse_cloudflare_response",
    "parse_response",
    "resolve_endpoint",
]


_HOMES = {
    "JevClient": "client",
    "Endpoint": "providers",
    "resolve_endpoint": "providers",
    "build_body": "wire",
    "hint_for_status": "wire",
    "parse_cloudflare_response": "wire",
    "parse_response": "wire",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)
