"""Redacted, one-line previews of tool inputs for the decision log.

The log outlives the session and may be shared in bug reports, so anything that looks like a
credential is masked *before* the preview is cut to length (a secret split by the cut would
otherwise escape the patterns). Stdlib only: the hook imports this on its hot path.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

MASK = "***"
PREVIEW_LIMIT = 160
ELLIPSIS = "…"

# Key segments that name a secret on their own ("github_token", "x-auth", "DB_PASSWORD").
_SECRET_SEGMENTS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "token",
        "secret",
        "apikey",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "privatekey",
    }
)
# Adjacent segment pairs that name a secret together ("api_key", "privateKey", "x-access-key").
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("session", "key")})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def is_secret_key(name: str) -> bool:
    """True when a key/flag/variable name says its value is a credential.

    Matching whole segments (not substrings) keeps ``max_tokens`` or ``passthrough`` visible.
    """
    segments = [s for s in _NON_ALNUM.split(_CAMEL.sub("_", name).lower()) if s]
    if not segments:
        return False
    if "".join(segments) in _SECRET_SEGMENTS or any(s in _SECRET_SEGMENTS for s in segments):
        return True
    return any(pair in _SECRET_PAIRS for pair in zip(segments, segments[1:]))


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str) -> bool:
    # Long, mixed letters+digits, high per-char entropy: keys and tokens, not words or paths.
    if len(value) < 20:
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    return _entropy(value) >= 3.5


# Value patterns that are secrets whatever key they sit under.
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", re.S
)
_AWS_KEY = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")
_VENDOR_TOKEN = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,})")
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/\-]{8,}=*", re.I)
_URL_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)([^/\s:@]+):([^/\s@]+)@")
# NAME=value (shell, query strings, env files, --flag=value).
_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_.\-]*)=(\"[^\"]*\"|'[^']*'|[^\s&;,\"'}]+)")
# "name": value / name: value (JSON or headers embedded in a command string).
_COLON = re.compile(r"([\"']?)([A-Za-z_][A-Za-z0-9_\-]*)\1\s*:\s*(\"[^\"]*\"|'[^']*'|[^\s,}\"']+(?:\s+[^\s,}\"']+)?)")
# --password value
_FLAG = re.compile(r"(--?([A-Za-z][A-Za-z0-9\-]*)\s+)(\"[^\"]*\"|'[^']*'|[^\s\-][^\s]*)")


def _quoted_mask(value: str) -> str:
    # Keep the quotes so the surrounding command still reads as a command.
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return f"{value[0]}{MASK}{value[0]}"
    return MASK


def _mask_assign(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    bare = value.strip("\"'")
    if is_secret_key(name) or _looks_random(bare):
        return f"{name}={_quoted_mask(value)}"
    return match.group(0)


def _mask_colon(match: re.Match[str]) -> str:
    quote, name, value = match.group(1), match.group(2), match.group(3)
    if not is_secret_key(name) or value.startswith(MASK) or value.strip("\"'") == MASK:
        return match.group(0)
    return f"{quote}{name}{quote}: {_quoted_mask(value)}"


def _mask_flag(match: re.Match[str]) -> str:
    if is_secret_key(match.group(2)):
        return f"{match.group(1)}{_quoted_mask(match.group(3))}"
    return match.group(0)


def redact_text(text: str) -> str:
    """Mask secret-looking substrings of free text. Idempotent."""
    text = _PEM.sub("[private key redacted]", text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _AWS_KEY.sub(MASK, text)
    text = _SK_KEY.sub(f"sk-{MASK}", text)
    text = _VENDOR_TOKEN.sub(MASK, text)
    text = _ASSIGN.sub(_mask_assign, text)
    text = _COLON.sub(_mask_colon, text)
    return _FLAG.sub(_mask_flag, text)


_WS = re.compile(r"\s+")


def _scrub(value: Any) -> Any:
    """Walk a JSON-like value: mask secret-named keys, redact and collapse every string."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if is_secret_key(name) and item not in (None, "", [], {}):
                out[name] = MASK
            else:
                out[name] = _scrub(item)
        return out
    if isinstance(value, (list, tuple)):
        return [_scrub(item) for item in value]
    if isinstance(value, str):
        return _WS.sub(" ", redact_text(value)).strip()
    return value


def clip(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """Cut to ``limit`` characters, marking the cut with an ellipsis."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def preview(input: Any, limit: int = PREVIEW_LIMIT) -> str:  # noqa: A002 - the tool's "input"
    """Compact JSON of a tool input, secrets masked, whitespace collapsed, at most ``limit`` chars."""
    text = json.dumps(_scrub(input), ensure_ascii=False, separators=(",", ":"), default=str)
    # A non-string leaf rendered through default=str could still carry a secret.
    return clip(_WS.sub(" ", redact_text(text)), limit)
