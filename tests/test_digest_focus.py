"""A digest keeps the lines the goal names: lines sharing its rare terms, and the lines of a file
read that another output pointed at (``path:line``)."""

from __future__ import annotations

from fast_jev_compaction.conversation.messages import ToolResult
from fast_jev_compaction.conversation.pairing import ToolCall
from fast_jev_compaction.decide.digest import DigestShape, digest
from fast_jev_compaction.decide.focus import focus_terms, terms
from fast_jev_compaction.decide.pointers import pointed_lines

SHAPE = DigestShape(budget=800, head=250, ids=275)


def numbered(lines: list[str]) -> str:
    """A file as the Read tool shows it."""
    return "\n".join(f"{n:6d}→{line}" for n, line in enumerate(lines, 1))


def config_read() -> str:
    """A 300-line settings file: three environments, each with its database, cache and queue."""
    lines = ["# Service settings, one block per environment.", "version: 3", ""]
    for env, pool, host in (("development", 5, "localhost"), ("staging", 37, "db.staging.internal"),
                            ("production", 120, "db-primary.prod.internal")):
        lines += [f"{env}:", "  database:", f"    host: {host}", "    port: 5432", f"    pool_size: {pool}",
                  "    pool_timeout_seconds: 30", "    statement_timeout_ms: 15000"]
        lines += [f"  feature_{k:02d}: {'true' if k % 3 else 'false'}" for k in range(80)]
        lines += ["  cache:", "    ttl_seconds: 300", ""]
    return numbered(lines)


def docs_page() -> str:
    """A provider's webhook docs, as a fetch returns them: long, and the signature rules deep in."""
    intro = [f"Events are delivered to your endpoint in order {k} of the retry schedule described below." for k in range(60)]
    objects = [f"| `event.field_{k:02d}` | string | Describes attribute {k} of the event object. |" for k in range(120)]
    signing = [
        "## Verifying signatures",
        "Each request carries an `X-Acme-Signature` header of the form `t=1700000000,v1=<hex>`.",
        "Compute an HMAC-SHA256 of `{t}.{raw_body}` with your endpoint's signing secret as the key.",
        "Compare your signature with `v1` using a constant-time comparison; reject the request otherwise.",
        "Reject signatures whose timestamp `t` is more than 300 seconds old, to stop replays.",
    ]
    outro = [f"Changelog entry {k}: clarified delivery semantics for event type number {k}." for k in range(60)]
    return "\n".join(["# Webhooks", *intro, "## Event object", *objects, *signing, "## Changelog", *outro])


def test_the_config_line_the_question_names_is_kept() -> None:
    text = config_read()
    shape = DigestShape(800, 250, 275, focus=focus_terms("What DB pool size does staging use?"))
    body, _ = digest(text, shape)
    assert "pool_size: 37" in body
    assert "pool_size: 37" not in digest(text, SHAPE)[0]


def test_the_docs_lines_on_the_signature_are_kept() -> None:
    text = docs_page()
    shape = DigestShape(800, 250, 275, focus=focus_terms("verify the webhook signature exactly as the signing docs say"))
    body, _ = digest(text, shape)
    for line in ("X-Acme-Signature", "HMAC-SHA256", "constant-time comparison"):
        assert line in body, line
        assert line not in digest(text, SHAPE)[0]


def test_a_goal_adds_no_text_and_keeps_the_budget() -> None:
    """The named lines are the output's own, and they spend the middle's and the closing's shares:
    the digest is no longer than without a goal (gap marks aside)."""
    for text, goal in ((config_read(), "What DB pool size does staging use?"),
                       (docs_page(), "verify the webhook signature exactly as the signing docs say")):
        body, kept = digest(text, DigestShape(800, 250, 275, focus=focus_terms(goal)))
        assert kept <= SHAPE.budget
        for line in body.splitlines():
            assert line.startswith(("[… ", "[ids and paths further in: ")) or line in text


def test_common_goal_words_name_nothing() -> None:
    """A term in most lines of the output is not rare there: it names no line."""
    text = docs_page()
    shape = DigestShape(800, 250, 275, focus=focus_terms("what is the event"))
    assert digest(text, shape) == digest(text, SHAPE)


def test_terms_split_identifiers_and_leave_question_words() -> None:
    assert terms("What DB pool size does staging use?") == {"db", "pool", "size", "staging"}
    assert terms("DB_POOL_SIZE poolSize HTTPServer signatures") == {"db", "pool", "size", "http", "server", "signature"}


def test_a_read_keeps_the_lines_a_search_pointed_at() -> None:
    """``src/ledger.py:412`` in a grep hit or a stack frame: the Read of that file keeps line 412."""
    lines = [f"    value_{n} = compute_step({n})  # step {n}" for n in range(1, 900)]
    lines[411] = "    balance -= refund.amount_cents  # applied once per line item"
    text = numbered(lines)
    body, _ = digest(text, SHAPE, frozenset({412}))
    assert "   412→    balance -= refund.amount_cents" in body
    assert "refund.amount_cents" not in digest(text, SHAPE)[0]


def call(n: int, tool: str, fields: dict[str, str]) -> ToolCall:
    return ToolCall(f"t{n}", f"toolu_{n}", tool, fields, 2 * n, 2 * n + 1, 0, False, False)


def test_a_read_keeps_the_lines_an_earlier_grep_and_traceback_named() -> None:
    lines = [f"    value_{n} = compute_step({n})  # step {n}" for n in range(1, 900)]
    lines[411] = "    balance -= refund.amount_cents  # applied once per line item"
    lines[644] = "    ledger.post(entry)  # posted at the end of the batch"
    read = numbered(lines)
    calls = [
        call(1, "Grep", {"pattern": "amount_cents", "path": "src"}),
        call(2, "Bash", {"command": "python -m app.refund 7"}),
        call(3, "Read", {"file_path": "/srv/app/src/ledger.py"}),
        call(4, "Read", {"file_path": "/srv/app/src/other/ledger.pyc"}),
    ]
    results = {
        "toolu_1": ToolResult("toolu_1", "src/ledger.py:412:    balance -= refund.amount_cents\nsrc/api.py:88:    x = amount_cents"),
        "toolu_2": ToolResult("toolu_2", 'Traceback (most recent call last):\n  File "/srv/app/src/ledger.py", line 645, in post\n'
                                         "ValueError: unbalanced entry"),
        "toolu_3": ToolResult("toolu_3", read),
        "toolu_4": ToolResult("toolu_4", "binary"),
    }
    pointed = pointed_lines(calls, results)
    assert pointed == {"toolu_3": frozenset({412, 645})}
    body, _ = digest(read, SHAPE, pointed["toolu_3"])
    assert "   412→    balance -= refund.amount_cents" in body and "   645→    ledger.post(entry)" in body


def test_only_earlier_outputs_point_and_only_into_the_same_file() -> None:
    calls = [call(1, "Read", {"file_path": "/srv/app/src/ledger.py"}), call(2, "Grep", {"pattern": "x"}),
             call(3, "Read", {"file_path": "/srv/app/lib/ledger.py"})]
    results = {"toolu_1": ToolResult("toolu_1", "1→x"), "toolu_2": ToolResult("toolu_2", "src/ledger.py:9:x"),
               "toolu_3": ToolResult("toolu_3", "1→x")}
    assert pointed_lines(calls, results) == {}


def test_each_read_of_a_file_has_the_pointers_made_before_it() -> None:
    calls = [call(1, "Grep", {"pattern": "x"}), call(2, "Read", {"file_path": "/srv/app/src/ledger.py"}),
             call(3, "Grep", {"pattern": "y"}), call(4, "Read", {"file_path": "/srv/app/src/ledger.py"}),
             call(5, "Read", {"file_path": "/srv/app/src/ledger.py"}), call(6, "Grep", {"pattern": "z"})]
    results = {"toolu_1": ToolResult("toolu_1", "src/ledger.py:9:x\nlib/ledger.py:3:x"),
               "toolu_2": ToolResult("toolu_2", "1→x"),
               "toolu_3": ToolResult("toolu_3", "src/ledger.py:40:y\nsrc/ledger.py:9:y"),
               "toolu_4": ToolResult("toolu_4", "1→x"), "toolu_5": ToolResult("toolu_5", "1→x"),
               "toolu_6": ToolResult("toolu_6", "src/ledger.py:77:z")}
    pointed = pointed_lines(calls, results)
    assert dict(pointed) == {"toolu_2": frozenset({9}), "toolu_4": frozenset({9, 40}), "toolu_5": frozenset({9, 40})}
    assert pointed.get("toolu_6", frozenset()) == frozenset() and len(pointed) == 3
