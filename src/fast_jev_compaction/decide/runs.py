"""Test-runner output: whether an output is a run with failures, and what each of its lines is.

A long failing run is mostly passing lines; what the session needs of it is each failure's test
id, its assertion (expected and actual) and where it failed. The runners print those in a few
shapes that are recognised here without knowing which runner ran: pytest, jest and vitest,
go test, cargo test (and mocha's numbered failures and totals).
"""

from __future__ import annotations

import re
from typing import Final

# The runner's own framing, one of which every run prints: its totals, a pass or fail status
# line, or its announcement of how many tests it collected.
_SIGNATURE = re.compile(
    r"^=+ .*\b\d+ (?:passed|failed|errors?)\b|^=+ (?:FAILURES|ERRORS|short test summary info) =+$|"
    r"^collect(?:ing \.\.\. collect)?ed \d+ items?|::\S+ (?:PASSED|FAILED)\b|"
    r"^\s*Tests?:?\s+(?:\d+ \w+[,|] +)*\d+ (?:failed|passed)\b|^\s*Test (?:Suites|Files):?\s+\d+|"
    r"^--- (?:FAIL|PASS): |^(?:ok|FAIL)\s+\S+\s+[\d.]+s$|"
    r"^test result: |^running \d+ tests?$|^\s+\d+ (?:passing|failing)\b",
    re.MULTILINE,
)
# What only a run with a failure prints: a failure count, a failing test's status line, the
# heading of the failures' section.
_FAILURE = re.compile(
    r"\b[1-9]\d* (?:failed|failing)\b|^=+ (?:FAILURES|ERRORS) =+$|::\S+ (?:FAILED|ERROR)\b|^(?:FAILED|ERROR) \S|"
    r"^\s*[✕×✗]\s|^\s*FAIL\s+\S|^\s*--- FAIL: |^test \S+ \.\.\. FAILED$|^test result: FAILED",
    re.MULTILINE,
)
_FAILURE_WORDS = ("FAIL", "ERROR", "failed", "failing", "✕", "×", "✗")
# A line that names a failing test, or the run's totals.
_FAILED_TEST = re.compile(
    r"^_{3,} .+ _{3,}$|^(?:FAILED|ERROR) \S|::\S+ (?:FAILED|ERROR)\b|"  # pytest
    r"^\s*[●✕×✗]\s|^\s*FAIL\s+\S|"  # jest, vitest
    r"^\s*--- FAIL: |"  # go
    r"^---- \S+ stdout ----$|^test \S+ \.\.\. FAILED$|"  # cargo
    r"^\s+\d+\) \S",  # mocha
    re.MULTILINE,
)
_TOTALS = re.compile(
    r"\b\d+ (?:failed|passed|failing|passing|errors?)\b|^test result: |^FAIL\s+\S+\s+[\d.]+s$|^FAIL$"
)
# What a failure says: the assertion, expected and actual values, the panic or exception.
_ASSERTION = re.compile(
    r"\bassert|\bexpect(?:ed)?\b|\breceived\b|\bactual\b|\bgot\b|\bwant(?:ed)?\b|\bshould\b|"
    r"\bmismatch|\bnot equal\b|\bdiffer|!=|==|^\s*(?:left|right):|\bpanic|"
    r"\b\w*(?:Error|Exception)\b:|^E\s{2,}\S",
    re.IGNORECASE,
)
# Where and around what it failed: file:line, the failing statement, a stack frame, a diff.
_DETAIL = re.compile(
    r"\S\.\w{1,6}:\d+|^E\s|^>\s|^\s*>\s*\d+\s*\||^\s+at \S|^\s*❯ \S|^\s*[-+]\s*\S"
)
# A line that reports a test that passed (or a step of the runner): never worth keeping here.
_PASSED = re.compile(
    r"\bPASS(?:ED)?\b|^\s*[✓✔√]\s|\.\.\. ok$|^\s*(?:ok|PASS)\s+\S+\s+[\d.]+s$|^=== (?:RUN|PAUSE|CONT)\s|"
    r"\bSKIPPED\b|\bXFAIL\b"
)

# Line kinds, best first: a failing test's name or the totals, its assertion, its details.
FAILED_TEST: Final = 0
ASSERTION: Final = 1
DETAIL: Final = 2
PASSED: Final = 3
OTHER: Final = 4


def has_failures(text: str, scan: int) -> bool:
    """Whether ``text`` (its first ``scan`` characters) is a test run that reports a failure."""
    return _reports_a_failure(text, scan) and _SIGNATURE.search(text, 0, scan) is not None


def _reports_a_failure(text: str, scan: int) -> bool:
    """Whether a line of ``text`` before ``scan`` matches ``_FAILURE``. Every match holds one of
    ``_FAILURE_WORDS``: only the lines that hold one are searched (the pattern over every
    output cost a digest of the corpus's outputs half as much again)."""
    for word in _FAILURE_WORDS:
        at = text.find(word, 0, scan)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            if _FAILURE.search(text, start, end):
                return True
            at = text.find(word, end, scan)
    return False


def line_kind(line: str) -> int:
    """What one line of a test run with failures is (``FAILED_TEST``, ``ASSERTION``, ...)."""
    if _FAILED_TEST.search(line) or _TOTALS.search(line):
        return FAILED_TEST
    if _PASSED.search(line):
        return PASSED
    if _ASSERTION.search(line):
        return ASSERTION
    if _DETAIL.search(line):
        return DETAIL
    return OTHER
