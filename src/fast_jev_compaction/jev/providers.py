"""Endpoint resolution: which provider, URL, model and key a ``JevClient`` talks to.

Resolution never fails on a missing key or account id: it records the problem in
``Endpoint.problem`` and the client raises ``JevConfigError`` when asked, so a compaction with
nothing to ask about still works unconfigured (as upstream does).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit

from ..errors import JevConfigError

Provider = Literal["systemone", "openrouter", "cloudflare"]
PROVIDERS: tuple[Provider, ...] = ("systemone", "openrouter", "cloudflare")

SYSTEM_ONE_URL = "https://api.typesafe.ai/v1/systemone"
OPENROUTER_URL = "https://openrouter.ai/api/alpha/decisions"
CLOUDFLARE_BASE = "https://api.cloudflare.com"
DEFAULT_MODEL = "jev-latest"
CLOUDFLARE_MODEL = "typesafe/jev"

_NO_KEY_HELP = "set it, pass apiKey, or use the embedded judge (--judge local)"


@dataclass(frozen=True)
class Endpoint:
    """A resolved endpoint. ``url`` is the full URL (the catalog form URL for Cloudflare)."""

    provider: Provider
    url: str
    model: str
    api_key: str
    # Names the user can act on in a 401 hint / missing-key message.
    key_source: str
    # Why a request cannot be sent (no key, no account id), as an actionable message.
    problem: str | None = None
    account_id: str = ""
    base: str = ""
    # Set when the key would travel over plain http to a non-loopback host.
    warning: str | None = None

    def cloudflare_url(self, form: Literal["catalog", "classic"]) -> str:
        """``…/ai/run`` (catalog, model in the body) or ``…/ai/run/<model>`` (classic, model in path)."""
        run = f"{self.base}/client/v4/accounts/{self.account_id}/ai/run"
        return run if form == "catalog" else f"{run}/{self.model}"


def openrouter_model(model: str) -> str:
    """OpenRouter names TypeSafe models with a vendor prefix; the alias gets the ``~`` form."""
    if "/" in model:
        return model
    if model == DEFAULT_MODEL:
        return "~typesafe/jev-latest"
    return f"typesafe/{model}"


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cleartext_warning(url: str) -> str | None:
    """A log line when ``url`` sends the key unencrypted to another machine, else ``None``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return None  # unparsable URLs fail loudly at request time instead
    if parts.scheme.lower() != "http" or _is_loopback(host):
        return None
    return f"baseUrl {url} is not https; the key travels in cleartext"


def _first(*values: str | None) -> str:
    for value in values:
        if value and value.strip():
            return value.strip()
    return ""


def _pick_provider(
    provider: str | None, api_key: str, account_id: str | None, env: Mapping[str, str]
) -> Provider:
    if provider is not None:
        if provider not in PROVIDERS:
            raise JevConfigError(f"unknown Jev provider {provider!r}: use one of {', '.join(PROVIDERS)}")
        return provider
    if api_key:
        return "openrouter" if api_key.startswith("sk-or-") else "systemone"
    typesafe = _first(env.get("TYPESAFE_API_KEY"))
    if typesafe:
        return "openrouter" if typesafe.startswith("sk-or-") else "systemone"
    if _first(env.get("OPENROUTER_API_KEY")):
        return "openrouter"
    # An account id only makes sense for Workers AI; so does a lone Cloudflare token.
    if _first(account_id) or _first(env.get("CLOUDFLARE_API_TOKEN")):
        return "cloudflare"
    return "systemone"


def resolve_endpoint(
    *,
    provider: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    account_id: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """Pick the provider (explicit, else from the key), then its URL, model and key.

    An explicit ``base_url`` forces the endpoint: the full URL for System One / OpenRouter, the
    API base for Cloudflare. The model name is mapped for the provider chosen.
    """
    env = os.environ if env is None else env
    option_key = _first(api_key)
    chosen = _pick_provider(provider, option_key, account_id, env)
    forced = _first(base_url)

    if chosen == "cloudflare":
        account = _first(account_id, env.get("CLOUDFLARE_ACCOUNT_ID"))
        token = _first(option_key, env.get("CLOUDFLARE_API_TOKEN"))
        problem = None
        if not token:
            problem = f"CLOUDFLARE_API_TOKEN is not configured: {_NO_KEY_HELP}"
        elif not account:
            problem = (
                "CLOUDFLARE_ACCOUNT_ID is not configured: set it, pass accountId, "
                "or use the embedded judge (--judge local)"
            )
        base = (forced or CLOUDFLARE_BASE).rstrip("/")
        # Workers AI only knows vendor-qualified names; the System One alias means its default.
        cf_model = model if model and "/" in model else CLOUDFLARE_MODEL
        endpoint = Endpoint(
            provider="cloudflare",
            url="",
            model=cf_model,
            api_key=token,
            key_source="CLOUDFLARE_API_TOKEN or the apiKey option",
            problem=problem,
            account_id=account,
            base=base,
            warning=cleartext_warning(base),
        )
        return replace(endpoint, url=endpoint.cloudflare_url("catalog"))

    if chosen == "openrouter":
        url = forced or OPENROUTER_URL
        key = _first(option_key, env.get("TYPESAFE_API_KEY"), env.get("OPENROUTER_API_KEY"))
        return Endpoint(
            provider="openrouter",
            url=url,
            model=openrouter_model(model or DEFAULT_MODEL),
            api_key=key,
            key_source="OPENROUTER_API_KEY, TYPESAFE_API_KEY or the apiKey option",
            problem=None if key else f"OPENROUTER_API_KEY (or TYPESAFE_API_KEY) is not configured: {_NO_KEY_HELP}",
            warning=cleartext_warning(url),
        )

    url = forced or SYSTEM_ONE_URL
    key = _first(option_key, env.get("TYPESAFE_API_KEY"))
    return Endpoint(
        provider="systemone",
        url=url,
        model=model or DEFAULT_MODEL,
        api_key=key,
        key_source="TYPESAFE_API_KEY or the apiKey option",
        problem=None if key else f"TYPESAFE_API_KEY is not configured: {_NO_KEY_HELP}",
        warning=cleartext_warning(url),
    )
