"""The one redactor: credentials are masked before any text leaves the process.

``redact_text(str) -> str`` masks secret-looking substrings of free text; ``redact_json(value)``
walks a JSON-like value, masks the values of secret-named keys and redacts every string, so a
JSON document stays valid. The Jev request body, the decision log and ``hook.log`` all go through
here. Archives keep the user's own bytes and never do.

What is masked: AWS access keys and secret keys, GitHub tokens (``ghp_``, ``gho_``, ``ghs_``,
``ghu_``, ``ghr_``, ``github_pat_``), Slack tokens (``xox?-``), OpenAI/Anthropic-style keys
(``sk-…``), Stripe (``sk_live_``, ``rk_live_``, ``…_test_``), Google (``AIza…``), GitLab
(``glpat-``), Hugging Face (``hf_``) and SendGrid (``SG.``) keys, JWTs, bearer/basic credentials, PEM private-key blocks (one cut before its END or
after its BEGIN loses everything on its cut side), ``KEY=value`` /
``key: value`` / ``--key value`` where the name says secret (``--pass`` too), URL userinfo
passwords, ``-u user:password`` (curl), and the ``-p`` value of ``mysql``, ``mariadb``,
``sshpass`` and any ``login`` command (``docker login -p``).

Linear time by construction (the old patterns were quadratic on long identifier runs because
every position of the run started a fresh scan to its end):

- every pattern opens with a negative lookbehind on the character class its first run scans,
  so inside such a run only its first position can start a match;
- every unbounded repeat is possessive (``*+``, ``++``) and stops at a character its successor
  needs, so a failed attempt never backtracks into it;
- ``name = value`` forms only match the name and the operator; the value is scanned (and
  consumed) only when the name is secret, so no value is scanned twice.

One family of patterns a module: ``pem`` (private-key blocks), ``shapes`` (secrets known by their
shape), ``named`` (values a name says are secret, and ``-p`` passwords), beside ``names`` (which
names are secret), ``entropy`` (which values look generated) and ``mask`` (what a secret
becomes). This module holds their order and the test that lets a text skip each pattern.

Stdlib only: the hook imports this on its hot path.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from . import shapes
from .mask import MASK, PEM_MASK
from .named import SECRET_WORDS, mask_named_values, mask_p_flags
from .names import is_secret_key
from .pem import mask_pem

__all__ = ["MASK", "PEM_MASK", "is_secret_key", "redact_json", "redact_text"]

# Every match of a secret name or an auth scheme holds one of these words (the same case-insensitive
# alternatives as the patterns'), so a text without any skips those patterns.
_HINT = re.compile(rf"(?i:{SECRET_WORDS}|bearer|basic)")


def _hinted(text: str) -> bool:
    return _HINT.search(text) is not None


def _holds(*literals: str) -> Callable[[str], bool]:
    return lambda text: any(literal in text for literal in literals)


def _always(text: str) -> bool:
    return True


# Each pattern beside a test that every text it can match passes (each match holds one of the
# literals): a text that fails it cannot change, and is not searched.
_SUBSTITUTIONS: tuple[tuple[Callable[[str], bool], re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_holds("://"), shapes.URL_USERINFO, rf"\1{MASK}@"),
    (_hinted, shapes.AUTH_SCHEME, shapes.mask_auth_scheme),
    (_holds(*shapes.AWS_PREFIXES), shapes.AWS_ACCESS_KEY, MASK),
    (_always, shapes.AWS_SECRET_KEY, shapes.mask_aws_secret),
    (_holds("gh", "github_pat_"), shapes.GITHUB_TOKEN, MASK),
    (_holds("xox"), shapes.SLACK_TOKEN, MASK),
    (_holds("sk-"), shapes.SK_KEY, f"sk-{MASK}"),
    (_holds(*shapes.VENDOR_PREFIXES), shapes.VENDOR_KEY, MASK),
    (_holds("-u", "-U"), shapes.USER_PASSWORD, shapes.mask_user_password),
    (_holds("eyJ"), shapes.JWT, MASK),
    (_holds("="), shapes.ASSIGNED_RANDOM, shapes.mask_assigned_random),
)


def redact_text(text: str) -> str:
    """Mask secret-looking substrings of free text. Idempotent; linear in ``len(text)``."""
    text = mask_pem(text)
    for may_match, pattern, replacement in _SUBSTITUTIONS:
        if may_match(text):
            text = pattern.sub(replacement, text)
    if "-p" in text:
        text = mask_p_flags(text)
    if not _hinted(text):
        return text
    return mask_named_values(text)


def redact_json(value: Any) -> Any:
    """A copy of a JSON-like value: secret-named keys' values masked, every string redacted."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key) and item not in (None, "", [], {}):
                out[key] = MASK
            else:
                out[key] = redact_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [redact_json(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
