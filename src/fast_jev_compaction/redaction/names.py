"""What makes a key, flag or variable name say its value is a credential."""

from __future__ import annotations

import re

# Name segments that mark a secret on their own ("github_token", "DB_PASSWORD", "SIGNING_KEY").
_SECRET_SEGMENTS = frozenset(
    {
        "password",
        "pass",
        "passwd",
        "passphrase",
        "pwd",
        "token",
        "secret",
        "key",
        "apikey",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "privatekey",
    }
)
# "key" after one of these names a lookup key, not a credential ("sort_key", "primary_key").
_PLAIN_KEY_PREFIXES = frozenset(
    {"primary", "foreign", "sort", "cache", "partition", "hash", "dict", "map", "row", "hot", "unique", "lookup", "group"}
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def is_secret_key(name: str) -> bool:
    """True when a key, flag or variable name says its value is a credential.

    Whole segments, not substrings: ``max_tokens``, ``passthrough`` and ``sort_key`` stay visible.
    """
    segments = [s for s in _NON_ALNUM.split(_CAMEL.sub("_", name[:256]).lower()) if s]
    if not segments:
        return False
    if "".join(segments) in _SECRET_SEGMENTS:
        return True
    if any(s in _SECRET_SEGMENTS and s != "key" for s in segments):
        return True
    # "key" names a credential as the last word ("SIGNING_KEY", "api_key"), unless a lookup key
    # ("sort_key"); "KeyError" or "key_file" are not secrets.
    return segments[-1] == "key" and (len(segments) == 1 or segments[-2] not in _PLAIN_KEY_PREFIXES)
