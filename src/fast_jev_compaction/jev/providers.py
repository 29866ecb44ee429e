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
from ..options import JEV_DEFAULT_MODEL, KEY_ENV_VARS

Provider = Literal["systemone", "openrouter", "cloudflare"]
PROVIDERS: tuple[Provider, ...] = ("systemone", "openrouter", "cloudflare")

SYSTEM_ONE_URL = "https://api.typesafe.ai/v1/systemone"
OPENROUTER_URL = "https://openrouter.ai/api/alpha/decisions"
CLOUDFLARE_BASE = "https://api.cloudflare.com"
DEFAULT_MODEL = JEV_DEFAULT_MODEL
CLOUDFLARE_MODEL = "typesafe/jev"

_NO_KEY_HELP = "set it or {api_key}, or use the embedded judge ({judge=local})"


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
    # What to do about ``problem`` (placeholders as in ``errors.render_hint``).
    hint: str = ""
    # Set when the endpoint is plain http to a non-loopback host (a key is then refused).
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


def pick_provider(
    provider: str | None, api_key: str | None, account_id: str | None, env: Mapping[str, str]
) -> tuple[Provider, str]:
    """The provider and its key. Unchosen: System One, or OpenRouter for a key that is theirs.

    Unchosen, only the key passed in and System One's variables are read: another provider's
    variable, set for another tool, never selects that provider by itself.
    """
    if provider is not None and provider != "auto":
        if provider not in PROVIDERS:
            raise JevConfigError(
                f"unknown Jev provider {provider!r}", hint=f"use one of {', '.join(PROVIDERS)} in {{provider}}"
            )
        return provider, _first(api_key, *(env.get(name) for name in KEY_ENV_VARS[provider]))
    key = _first(api_key, *(env.get(name) for name in KEY_ENV_VARS["systemone"]))
    if key:
        return ("openrouter" if key.startswith("sk-or-") else "systemone"), key
    # An account id only makes sense for Workers AI.
    if _first(account_id):
        return "cloudflare", _first(*(env.get(name) for name in KEY_ENV_VARS["cloudflare"]))
    return "systemone", ""


def wants_jev(
    judge: str, *, provider: str | None = None, api_key: str | None = None, base_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """``jev`` always, ``local`` never; ``auto`` when a key or an endpoint URL is configured."""
    if judge != "auto":
        return judge == "jev"
    env = os.environ if env is None else env
    return bool(_first(base_url)) or bool(pick_provider(provider, api_key, None, env)[1])


def _key_problem(key: str, url: str, names: tuple[str, ...]) -> tuple[str | None, str]:
    """Why no request may go out, and its hint: no key (unless the endpoint is loopback) or cleartext."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        scheme = parts.scheme.lower()
    except ValueError:
        return None, ""  # unparsable URLs fail loudly at request time instead
    if _is_loopback(host):
        return None, ""  # a local endpoint (fast-jev serve) needs no key, and nothing leaves the machine
    if not key:
        return f"{' or '.join(names)} is not configured", _NO_KEY_HELP
    if scheme == "http":
        return (
            f"refusing to send the Jev key over plain http to {host}",
            "use an https URL in {base_url}, or a loopback one",
        )
    return None, ""


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
    chosen, key = pick_provider(provider, api_key, account_id, env)
    forced = _first(base_url)

    if chosen == "cloudflare":
        account = _first(account_id, env.get("CLOUDFLARE_ACCOUNT_ID"))
        token = key
        base = (forced or CLOUDFLARE_BASE).rstrip("/")
        problem, hint = _key_problem(token, base, KEY_ENV_VARS["cloudflare"])
        if problem is None and not account:
            problem, hint = "CLOUDFLARE_ACCOUNT_ID is not configured", "set it, or use the embedded judge ({judge=local})"
        # Workers AI only knows vendor-qualified names; the System One alias means its default.
        cf_model = model if model and "/" in model else CLOUDFLARE_MODEL
        endpoint = Endpoint(
            provider="cloudflare",
            url="",
            model=cf_model,
            api_key=token,
            key_source=" or ".join(KEY_ENV_VARS["cloudflare"]),
            problem=problem,
            hint=hint,
            account_id=account,
            base=base,
            warning=cleartext_warning(base),
        )
        return replace(endpoint, url=endpoint.cloudflare_url("catalog"))

    if chosen == "openrouter":
        url = forced or OPENROUTER_URL
        problem, hint = _key_problem(key, url, KEY_ENV_VARS["openrouter"])
        return Endpoint(
            provider="openrouter",
            url=url,
            model=openrouter_model(model or DEFAULT_MODEL),
            api_key=key,
            key_source=" or ".join(KEY_ENV_VARS["openrouter"]),
            problem=problem,
            hint=hint,
            warning=cleartext_warning(url),
        )

    url = forced or SYSTEM_ONE_URL
    problem, hint = _key_problem(key, url, KEY_ENV_VARS["systemone"])
    return Endpoint(
        provider="systemone",
        url=url,
        model=model or DEFAULT_MODEL,
        api_key=key,
        key_source=" or ".join(KEY_ENV_VARS["systemone"]),
        problem=problem,
        hint=hint,
        warning=cleartext_warning(url),
    )
