"""A failing test run's digest keeps every failure (test id, assertion, expected and actual,
file:line) and leaves the passing lines to the archive, whichever runner printed it."""

from __future__ import annotations

import pytest

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.decide.digest import DigestShape, digest
from fast_jev_compaction.decide.markers import PREFIX
from fast_jev_compaction.decide.rebuild import cut_output
from fast_jev_compaction.options import resolve_options
from scripted_asker import ScriptedAsker, assistant, result, results, use, user

SHAPE = DigestShape(budget=800, head=250, ids=275)


def pytest_run() -> tuple[str, list[list[str]]]:
    """``pytest -v`` with 400 passes and three failures, as pytest 8 prints it."""
    names = [f"tests/test_billing.py::TestInvoices::test_case_{n:03d}" for n in range(400)]
    failing = {37: "test_case_037", 205: "test_case_205", 388: "test_case_388"}
    status = [
        f"{name} {'FAILED' if n in failing else 'PASSED'}{' ' * 8}[{(n + 1) * 100 // 400:3d}%]"
        for n, name in enumerate(names)
    ]
    blocks: list[str] = []
    wanted: list[list[str]] = []
    for n, test in failing.items():
        expected, actual = 1000 + n, 990 + n
        lines = [
            f"{'_' * 20} TestInvoices.{test} {'_' * 20}",
            "",
            "self = <tests.test_billing.TestInvoices object at 0x7f3a2c1d9e50>",
            "",
            f"    def {test}(self):",
            "        invoice = make_invoice(lines=3)",
            f">       assert invoice.total_cents == {expected}",
            f"E       assert {actual} == {expected}",
            f"E        +  where {actual} = Invoice(id=7, lines=3).total_cents",
            "",
            f"tests/test_billing.py:{100 + n}: AssertionError",
        ]
        blocks += lines
        wanted.append([test, f"E       assert {actual} == {expected}", f"tests/test_billing.py:{100 + n}: AssertionError"])
    text = "\n".join(
        [
            "============================= test session starts ==============================",
            "platform linux -- Python 3.12.4, pytest-8.3.2, pluggy-1.5.0 -- /srv/app/.venv/bin/python",
            "rootdir: /srv/app",
            "collecting ... collected 400 items",
            "",
            *status,
            "",
            "=================================== FAILURES ===================================",
            *blocks,
            "=========================== short test summary info ============================",
            *(f"FAILED {names[n]} - assert {990 + n} == {1000 + n}" for n in failing),
            "======================== 3 failed, 397 passed in 12.31s ========================",
        ]
    )
    return text, wanted


def jest_run() -> tuple[str, list[list[str]]]:
    """``jest`` over 60 suites, two failing tests in one of them."""
    passing = [f"PASS src/components/widget{n:02d}.test.tsx\n" + "\n".join(
        f"  ✓ renders variant {k} of widget {n} correctly ({k + 2} ms)" for k in range(6)
    ) for n in range(60)]
    failures = [
        ("Cart › applies the member discount", "Expected: 90", "Received: 100", 14),
        ("Cart › rounds totals to cents", "Expected: 10.01", "Received: 10.009999", 31),
    ]
    blocks: list[str] = []
    for title, expected, received, line in failures:
        blocks += [
            f"  ● {title}",
            "",
            "    expect(received).toBe(expected) // Object.is equality",
            "",
            f"    {expected}",
            f"    {received}",
            "",
            f"      {line - 1} |   const cart = makeCart();",
            f"    > {line} |   expect(cart.total()).toBe(90);",
            "         |                        ^",
            "",
            f"      at Object.<anonymous> (src/cart/cart.test.ts:{line}:24)",
            "",
        ]
    text = "\n".join(
        [
            *passing[:30],
            "FAIL src/cart/cart.test.ts",
            "  Cart",
            "    ✓ adds an item (3 ms)",
            "    ✕ applies the member discount (5 ms)",
            "    ✕ rounds totals to cents (2 ms)",
            "",
            *blocks,
            *passing[30:],
            "",
            "Test Suites: 1 failed, 60 passed, 61 total",
            "Tests:       2 failed, 361 passed, 363 total",
            "Snapshots:   0 total",
            "Time:        9.412 s",
            "Ran all test suites.",
        ]
    )
    wanted = [[title, expected, received, f"src/cart/cart.test.ts:{line}:24"] for title, expected, received, line in failures]
    return text, wanted


def vitest_run() -> tuple[str, list[list[str]]]:
    """``vitest run``: many passing files, one failure with its diff."""
    files = [f" ✓ src/lib/module{n:03d}.test.ts (12 tests) {n + 4}ms" for n in range(300)]
    text = "\n".join(
        [
            " RUN  v2.1.8 /home/dev/shop",
            "",
            *files[:150],
            " ❯ src/cart/cart.test.ts (3 tests | 1 failed) 21ms",
            "   × Cart > applies the member discount 8ms",
            *files[150:],
            "",
            "⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯",
            "",
            " FAIL  src/cart/cart.test.ts > Cart > applies the member discount",
            "AssertionError: expected 100 to be 90 // Object.is equality",
            "",
            "- Expected",
            "+ Received",
            "",
            "- 90",
            "+ 100",
            "",
            " ❯ src/cart/cart.test.ts:14:24",
            "",
            "⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[1/1]⎯",
            "",
            " Test Files  1 failed | 300 passed (301)",
            "      Tests  1 failed | 3602 passed (3603)",
            "   Duration  6.21s",
        ]
    )
    return text, [["Cart > applies the member discount", "AssertionError: expected 100 to be 90", "- 90", "+ 100",
                   "src/cart/cart.test.ts:14:24"]]


def go_run() -> tuple[str, list[list[str]]]:
    """``go test -v ./...``: three failures among 300 passing tests, their messages before each
    ``--- FAIL``."""
    lines: list[str] = []
    wanted: list[list[str]] = []
    for n in range(300):
        lines.append(f"=== RUN   TestLedger{n:03d}")
        if n in (12, 150, 299):
            message = f"    ledger_test.go:{40 + n}: balance after refund: got {n * 10}, want {n * 10 + 5}"
            lines += [message, f"--- FAIL: TestLedger{n:03d} (0.00s)"]
            wanted.append([f"--- FAIL: TestLedger{n:03d}", message])
        else:
            lines.append(f"--- PASS: TestLedger{n:03d} (0.00s)")
    text = "\n".join([*lines, "FAIL", "FAIL\tgithub.com/acme/payments/ledger\t0.412s",
                      "ok  \tgithub.com/acme/payments/api\t0.220s", "FAIL"])
    return text, wanted


def cargo_run() -> tuple[str, list[list[str]]]:
    """``cargo test``: 500 tests, three of them panicking on an ``assert_eq!``."""
    failing = (41, 250, 498)
    status = [f"test ledger::tests::case_{n:03d} ... {'FAILED' if n in failing else 'ok'}" for n in range(500)]
    blocks: list[str] = []
    wanted: list[list[str]] = []
    for n in failing:
        blocks += [
            f"---- ledger::tests::case_{n:03d} stdout ----",
            f"thread 'ledger::tests::case_{n:03d}' panicked at src/ledger.rs:{200 + n}:9:",
            "assertion `left == right` failed",
            f"  left: {n}",
            f" right: {n + 1}",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
            "",
        ]
        wanted.append([f"ledger::tests::case_{n:03d}", f"panicked at src/ledger.rs:{200 + n}:9", f"  left: {n}", f" right: {n + 1}"])
    text = "\n".join(
        [
            "   Compiling ledger v0.3.1 (/home/dev/ledger)",
            "    Finished `test` profile [unoptimized + debuginfo] target(s) in 4.02s",
            "     Running unittests src/lib.rs (target/debug/deps/ledger-5d1c2f0e9a8b7c6d)",
            "",
            "running 500 tests",
            *status,
            "",
            "failures:",
            "",
            *blocks,
            "failures:",
            *(f"    ledger::tests::case_{n:03d}" for n in failing),
            "",
            "test result: FAILED. 497 passed; 3 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.31s",
            "",
            "error: test failed, to rerun pass `--lib`",
        ]
    )
    return text, wanted


RUNS = {"pytest": pytest_run, "jest": jest_run, "vitest": vitest_run, "go test": go_run, "cargo test": cargo_run}


@pytest.mark.parametrize("runner", RUNS)
def test_every_failure_keeps_its_test_id_and_assertion(runner: str) -> None:
    text, wanted = RUNS[runner]()
    assert len(text) > 8 * SHAPE.budget
    body, kept = digest(text, SHAPE)
    for failure in wanted:
        for line in failure:
            assert line in body, (runner, line)
    assert kept < len(text) // 2


@pytest.mark.parametrize("runner", RUNS)
def test_a_failing_run_keeps_no_passing_line_and_stays_within_its_budget(runner: str) -> None:
    text, _ = RUNS[runner]()
    body, _ = digest(text, SHAPE)
    assert len(body) <= SHAPE.failures
    for line in body.splitlines():
        assert not line.rstrip().endswith(("PASSED", "... ok")) and "--- PASS" not in line and "✓" not in line


@pytest.mark.parametrize("runner", RUNS)
def test_a_digest_only_selects_lines_of_the_output(runner: str) -> None:
    """Nothing is added but the gap marks and the line of ids: no text of another output (a
    secret, a value from elsewhere) can enter a digest."""
    text, _ = RUNS[runner]()
    body, _ = digest(text, SHAPE)
    for line in body.splitlines():
        if line.startswith("[… ") or line.startswith("[ids and paths further in: "):
            continue
        assert line in text


@pytest.mark.parametrize("budget", [0, 250, 800, 1600])
@pytest.mark.parametrize("runner", RUNS)
def test_no_budget_is_exceeded(runner: str, budget: int) -> None:
    text, _ = RUNS[runner]()
    shape = DigestShape(budget=budget, head=min(budget, 250), ids=(budget - min(budget, 250)) // 2)
    body, _ = digest(text, shape)
    assert len(body) <= max(shape.failures, len("[… 99,999 chars …]"))


def test_a_passing_run_keeps_the_ordinary_digest() -> None:
    text, _ = pytest_run()
    passing = text.replace("FAILED", "PASSED").replace("3 failed, 397 passed", "400 passed")
    passing = passing[: passing.index("=== FAILURES")] + passing[passing.rindex("\n") + 1 :]
    body, _ = digest(passing, SHAPE)
    assert len(body) < SHAPE.budget + 100


def test_the_latest_failing_run_cut_under_a_rule_keeps_its_failures() -> None:
    """The output the open-error rule truncates (31 kB of ``pytest -v``) keeps, in the cut that
    stands in the conversation, every failing assertion near its end."""
    text, wanted = pytest_run()
    cut = cut_output(text, True, SHAPE, "/archive/ab12.txt")
    assert cut is not None and cut.splitlines()[-1].startswith(PREFIX)
    for failure in wanted:
        assert all(line in cut for line in failure)
    assert len(text) - len(cut) > 0.8 * len(text)


@pytest.mark.parametrize("runner, command", [("pytest", "pytest -v"), ("go test", "go test -v ./..."), ("cargo test", "cargo test")])
def test_a_compaction_keeps_the_failures_of_the_run_the_user_says_still_fails(runner: str, command: str) -> None:
    """Through compact(): the latest run, failing and over the rules' cap, is cut to its digest
    under a rule, and the rebuilt conversation holds every failure."""
    text, wanted = RUNS[runner]()
    messages = [
        user("fix the ledger totals"),
        assistant("", use("c0", "Bash", command=command)),
        results(result("c0", text, True)),
        assistant("Three tests fail; looking into the ledger."),
        user("it still fails, why?"),
    ]
    out = compact_sync(messages, ScriptedAsker(0.5), resolve_options(preserve_recent_messages=1))
    [decision] = out.decisions
    assert (decision.action, decision.reason) in {("truncate", "open-error"), ("truncate", "latest-run")}
    [kept] = [r.text for m in out.messages for r in (m.toolResults or ())]
    for failure in wanted:
        assert all(line in kept for line in failure)


@pytest.mark.parametrize("runner", RUNS)
def test_the_line_of_ids_names_no_passing_test(runner: str) -> None:
    text, _ = RUNS[runner]()
    body, _ = digest(text, SHAPE)
    ids = [line for line in body.splitlines() if line.startswith("[ids and paths further in: ")]
    passing = ("test_case_000", "widget00.test.tsx", "module000.test.ts", "TestLedger000", "case_000")
    assert not any(name in line for line in ids for name in passing)
