"""Secrets known by their shape, whatever names them: vendor keys and tokens, AWS keys, JWTs,
bearer/basic credentials, URL and curl passwords, and assigned values that look generated."""

from __future__ import annotations

import re

from .entropy import looks_random
from .mask import MASK

URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*+://[^\s/?#@:]++:)[^\s/?#@]++@")
AUTH_SCHEME = re.compile(r"(?<![A-Za-z0-9_])((?i:bearer|basic)[ \t]++)([A-Za-z0-9._~+/\-]++=*+)")
AWS_PREFIXES = ("AKIA", "ASIA", "AIDA", "AROA", "AGPA", "ANPA", "ANVA", "AIPA", "ABIA", "ACCA")
AWS_ACCESS_KEY = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(AWS_PREFIXES) + r")[0-9A-Z]{16}(?![A-Za-z0-9])")
AWS_SECRET_KEY = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
GITHUB_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20}|github_pat_[A-Za-z0-9_]{20})[A-Za-z0-9_]*+")
SLACK_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])xox[abposr]-[A-Za-z0-9\-]{10}[A-Za-z0-9\-]*+")
SK_KEY = re.compile(r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{16}[A-Za-z0-9_\-]*+")
# Vendor keys known by their prefix alone.
VENDOR_PREFIXES = ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "AIza", "glpat-", "hf_", "SG.")
VENDOR_KEY = re.compile(
    r"(?<![A-Za-z0-9_\-.])(?:[sr]k_(?:live|test)_[A-Za-z0-9]{8}|AIza[A-Za-z0-9_\-]{30}|glpat-[A-Za-z0-9_\-]{16}"
    r"|hf_[A-Za-z0-9]{24}|SG\.[A-Za-z0-9_\-]{16,}+\.[A-Za-z0-9_\-]{16})[A-Za-z0-9_\-.]*+"
)
# curl's -u/--user (and -U/--proxy-user) user:password, quoted (to the quote) or not (to a space);
# the user stays.
USER_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9_\-])((?:-[uU]|--user|--proxy-user)(?:[ \t]++|=)?+)"
    r"(?:(\\?[\"'])([^\s:\"'\\]++:)[^\"'\\\n]*+|([^\s:\"'\\]++:)[^\s\"'\\]++)"
)
JWT = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]++\.eyJ[A-Za-z0-9_\-]++\.[A-Za-z0-9_\-]*+")
# =value that looks like a generated key, whatever the name ("SIGNING=q8Zr4TbX2mWn7KpL9vYc").
ASSIGNED_RANDOM = re.compile(r"(?<==)([\"']?+)([A-Za-z0-9+/_\-.~]{20,}+)")


def mask_auth_scheme(match: re.Match[str]) -> str:
    credential = match.group(2)
    # "Basic authentication" is prose; a credential has digits, symbols or inner capitals.
    looks_like_one = len(credential) >= 8 and (
        any(not c.isalpha() for c in credential) or any(c.isupper() for c in credential[1:])
    )
    return f"{match.group(1)}{MASK}" if looks_like_one else match.group(0)


def mask_aws_secret(match: re.Match[str]) -> str:
    return MASK if looks_random(match.group(0), 40, 4.0) else match.group(0)


def mask_user_password(match: re.Match[str]) -> str:
    flag, quote, quoted_user, user = match.groups()
    return f"{flag}{quote}{quoted_user}{MASK}" if quote else f"{flag}{user}{MASK}"


def mask_assigned_random(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MASK}" if looks_random(match.group(2)) else match.group(0)
