"""The one redactor (fast_jev_compaction.redaction): what it masks, what it keeps, and that its
time grows linearly with the input whatever the input is."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fast_jev_compaction import redaction
from fast_jev_compaction.redaction import MASK, is_secret_key, named, pem, redact_json, redact_text

# One planted secret of every kind the redactor promises to mask, as it appears in the wild.
# (Not real credentials: the shapes are right, the values are made up.)
SECRETS: dict[str, tuple[str, str]] = {
    "aws access key": ("aws s3 ls # AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "aws secret key": ("secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY here", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    "github ghp": ("token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "github gho": ("gho_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2", "gho_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"),
    "github ghs": ("ghs_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8", "ghs_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"),
    "github ghu": ("ghu_M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8", "ghu_M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8"),
    "github pat": ("github_pat_11ABCDEFG0aBcDeFgHiJkLmN_OpQrStUvWxYz0123456789", "github_pat_11ABCDEFG0aBcDeFgHiJkLmN"),
    "slack": ("SLACK xoxb-2048-1357924680-AbCdEfGhIjKl", "xoxb-2048-1357924680-AbCdEfGhIjKl"),
    "openai": ("OPENAI sk-proj-Ab12Cd34Ef56Gh78Ij90Kl", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl"),
    "anthropic": ("use sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2", "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"),
    "jwt": (
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI0MiJ9.c2lnbmF0dXJlX2hlcmVfMTIz",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI0MiJ9.c2lnbmF0dXJlX2hlcmVfMTIz",
    ),
    "bearer": ("curl -H 'Authorization: Bearer tok.Abc123_xyz-987' x", "tok.Abc123_xyz-987"),
    "bearer bare": ("send Bearer Qm9iQm9iMTIzNDU2Nzg5", "Qm9iQm9iMTIzNDU2Nzg5"),
    "basic": ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAsecretkeymaterial\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAsecretkeymaterial",
    ),
    "env password": ("DB_PASSWORD=correct-horse-battery", "correct-horse-battery"),
    "env key": ("STRIPE_KEY='rk_live_51H8q9'", "rk_live_51H8q9"),
    "env token spaced": ('GITHUB_TOKEN = "opaque-value-1"', "opaque-value-1"),
    "env secret export": ("export CLIENT_SECRET=hushhush", "hushhush"),
    "env credential": ("GOOGLE_CREDENTIALS=/etc/creds.json", "/etc/creds.json"),
    "env passwd": ("PASSWD=letmein99", "letmein99"),
    "yaml": ("password: hunter2", "hunter2"),
    "json text": ('{"api_key": "plain-value-7"}', "plain-value-7"),
    "flag": ("mysql --password hunter22 -u root", "hunter22"),
    "flag equals": ("deploy --token=abc123def", "abc123def"),
    "url userinfo": ("git clone https://bob:s3cr3t-pw@github.com/x/y", "s3cr3t-pw"),
    "db url": ("postgres://admin:pa55word@db.internal:5432/app", "pa55word"),
    "random under any name": ("SIGNING=q8Zr4TbX2mWn7KpL9vYc3HsJ", "q8Zr4TbX2mWn7KpL9vYc3HsJ"),
    "curl user": ("curl -u admin:Adm1nPass99 https://api.example.com", "Adm1nPass99"),
    "curl user quoted": ("curl --user 'admin:two words99' https://x", "two words99"),
    "mysql attached": ("mysql -uroot -pS3cretDbPw app < dump.sql", "S3cretDbPw"),
    "sshpass": ("sshpass -p 'Ss4Shpass' ssh deploy@host", "Ss4Shpass"),
    "docker login": ("docker login -u bob -p D0ckerPw registry.example.com", "D0ckerPw"),
    "flag pass": ("tool --pass hunter77 --verbose", "hunter77"),
    "flag pass equals": ("tool --pass=hunter78", "hunter78"),
    "env pass": ("SMTP_PASS=mailpw123", "mailpw123"),
    "stripe restricted": ("key rk_live_51H8q9AbCdEfGh", "rk_live_51H8q9AbCdEfGh"),
    "stripe secret": ("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    "google api": ("maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    "gitlab": ("GITLAB glpat-AbCd1234EfGh5678IjKl", "glpat-AbCd1234EfGh5678IjKl"),
    "hugging face": ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 used", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    "sendgrid": (
        "mail 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",
        "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    ),
}


@pytest.mark.parametrize(("text", "secret"), SECRETS.values(), ids=SECRETS.keys())
def test_every_kind_of_secret_is_masked(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert MASK in out or "[private key redacted]" in out
    assert redact_text(out) == out  # idempotent


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB", "key:\n"),
        ("b3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB\n-----END OPENSSH PRIVATE KEY-----\ndone", "\ndone"),
    ],
    ids=["no END line", "no BEGIN line"],
)
def test_redact_text_masks_a_private_key_block_cut_at_either_end(text: str, kept: str) -> None:
    out = redact_text(text)
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in out and "QyNTUxOQAAACB" not in out
    assert kept in out and "[private key redacted]" in out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "git log --oneline -n 5 && pytest --mode=fast",
        "Basic authentication is supported; Bearer tokens too.",
        "commit 3f2a9c1b7e4d5f6a8b9c0d1e2f3a4b5c6d7e8f90 on main",
        "sort_key=name max_tokens=100 cache_key=abc KeyError: 'toolu_1'",
        "https://example.com/path?query=1#frag",
        "src/fast_jev_compaction/hook/entry.py:42: def main()",
        "ssh -i ~/.ssh/id_ed25519 host",
        "gcc -pthread -O2 x.c && mkdir -p out && git push -u origin main",
        "Pass: 12 Fail: 0",
        "mysql -u root -p",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_secret_names_are_whole_segments() -> None:
    assert is_secret_key("accessToken") and is_secret_key("x-api-key") and is_secret_key("SIGNING_KEY")
    assert is_secret_key("DB_PASSWORD") and is_secret_key("GOOGLE_CREDENTIALS") and is_secret_key("key")
    assert not is_secret_key("max_tokens") and not is_secret_key("passthrough") and not is_secret_key("sort_key")
    assert not is_secret_key("KeyError") and not is_secret_key("key_file")


def test_redact_json_keeps_the_document_valid_and_masks_inside_strings() -> None:
    state = {
        "goal": "deploy with DB_PASSWORD=hunter2",
        "history": [{"tool": "Bash", "input": {"command": "curl -H 'Authorization: Bearer abcdefgh123'"}}],
        "headers": {"X-Api-Key": "plain"},
        "count": 3,
        "quote": 'he said "AKIAIOSFODNN7EXAMPLE"',
    }
    out = redact_json(state)
    text = json.dumps(out)
    assert json.loads(text) == out
    assert "hunter2" not in text and "abcdefgh123" not in text and "plain" not in text
    assert "AKIAIOSFODNN7EXAMPLE" not in text
    assert out["count"] == 3 and state["headers"]["X-Api-Key"] == "plain"  # the input is not touched


# --------------------------------------------------------------------------- linear time

# Fragments that once made (or could make) a pattern rescan a long run from every position.
FRAGMENTS = [
    "a", "Z", "0", "9", "_", "-", ".", "=", ":", "/", "+", "@", " ", "\t", "\n", '"', "'", "*",
    "sk-", "ghp_", "xoxb-", "eyJ", "AKIA", "--", "://", "Bearer ", "basic ", "key", "password", "token",
    "-----BEGIN ", "PRIVATE KEY-----", "sort_key", "KEY=", "pass:", "=\"", "':", "--token ",
    "mysql", "login", " -p", "-u ", "--user=", "rk_live_", "AIza", "glpat-", "hf_", "SG.",
]
UNIT = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12).map("".join)
SIZE = 64 * 1024
PROSE_UNIT = "The quick brown fox jumps over the lazy dog while the build runs its tests. "


def _best_of(runs: int, text: str) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        redact_text(text)
        best = min(best, time.perf_counter() - started)
    return best


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


@pytest.fixture(scope="module")
def prose_seconds() -> float:
    return _best_of(3, _fill(PROSE_UNIT, SIZE))


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(unit=UNIT)
# The reproduction: long runs of identifier characters (hex, base64) in a tool input.
@example(unit="0123456789abcdef")
@example(unit="QmFzZTY0K/+=")
@example(unit="a.")
@example(unit="a:")
def test_time_per_megabyte_is_bounded_by_prose_time(unit: str, prose_seconds: float) -> None:
    # A quadratic pattern costs hundreds of times prose on 64 KB of one repeated fragment; a
    # linear one stays within a small factor. The factor is wide so a busy machine cannot fail it.
    adversarial = _best_of(2, _fill(unit, SIZE))
    assert adversarial <= 10 * prose_seconds + 0.05, (unit, adversarial, prose_seconds)


ADVERSARIAL_MB = "".join(
    _fill(unit, 1024 * 1024 // 8)
    for unit in ("a1b2c3d4e5", "a.", "a=", "k=\"", "'a':", "--a ", "x://u:p", "eyJa.")
)
PROSE_MB = _fill(PROSE_UNIT, len(ADVERSARIAL_MB))


def test_benchmark_adversarial_megabyte_within_3x_prose(benchmark: pytest.FixtureRequest) -> None:
    """Run with ``--benchmark-enable``: then the best adversarial time must be within 3x prose."""
    benchmark.pedantic(redact_text, args=(ADVERSARIAL_MB,), rounds=3, iterations=1)  # type: ignore[attr-defined]
    if benchmark.enabled:  # type: ignore[attr-defined]
        prose = _best_of(3, PROSE_MB)
        assert benchmark.stats.stats.min <= 3 * prose, (benchmark.stats.stats.min, prose)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- skipped patterns

def _every_pattern(text: str) -> str:
    """The redactor with every pattern run on every text: what the skips must equal."""
    text = pem.mask_pem(text)
    for _, pattern, replacement in redaction._SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    text = named.mask_p_flags(text)
    return named.mask_named_values(text)


# Words that match the patterns' case-insensitive alternatives only through Unicode folding.
FOLDED = ["pa\u017fs=hunter22", "\u212aEY: v4lue-here", "AU\u0130H: x", "to\u212aen=abcdef", "BEARER Qm9iQm9iMTIz"]


@pytest.mark.parametrize("text", [*(text for text, _ in SECRETS.values()), *FOLDED, "plain text, no secret", ""])
def test_a_pattern_is_skipped_only_where_it_cannot_match(text: str) -> None:
    assert redact_text(text) == _every_pattern(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*FRAGMENTS, *FOLDED, "AbCd1234EfGh5678IjKl9012MnOp3456QrSt7890"]), max_size=16).map("".join))
def test_skipping_never_changes_what_is_masked(text: str) -> None:
    assert redact_text(text) == _every_pattern(text)
