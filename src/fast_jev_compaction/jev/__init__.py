"""The Jev HTTP client: wire format, providers, and ``JevClient``.

``JevClient`` is loaded lazily so that importing this package (for the wire helpers or the
provider resolution) does not pay for httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .providers import Endpoint, resolve_endpoint
from .wire import build_body, hint_for_status, parse_cloudflare_response, parse_response

if TYPE_CHECKING:
    from .client import JevClient

__all__ = [
    "Endpoint",
    "JevClient",
    "build_body",
    "hint_for_status",
    "parse_cloudflare_response",
    "parse_response",
    "resolve_endpoint",
]


def __getattr__(name: str) -> Any:
    if name == "JevClient":
        from .client import JevClient

        return JevClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
