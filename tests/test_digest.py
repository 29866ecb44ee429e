"""The digest's line of ids: the names a later turn reuses, kept when the lines holding them are not."""

from __future__ import annotations

import re

from fast_jev_compaction.decide.digest import DigestShape, digest
from fast_jev_compaction.decide.markers import ids_line

SHAPE = DigestShape(budget=800, head=250, ids=275)
IDS_OPENING = ids_line([]).removesuffix("]")


def filler(lines: int, word: str = "plain") -> str:
    return "\n".join(f"{word} line {n} of ordinary words" for n in range(lines))


def test_names_from_the_left_out_part_close_the_digest_in_order():
    names = ["tests/test_refunds.py::test_partial_refund", "src/payments/ledger_client.py", "PAY-2291-refund-partial-v2"]
    text = "\n".join([filler(40), f"  {names[0]} ok", filler(200), f"see {names[1]} and {names[2]}.", filler(200)])
    body, kept = digest(text, SHAPE)
    last = body.splitlines()[-1]
    assert last == ids_line(names)
    assert kept < len(text) and len(body) < 900


def test_plain_words_rules_and_names_already_shown_are_not_listed():
    shown = "src/app/settings_loader.py"
    text = "\n".join(
        [f"reading {shown}", filler(100), "=" * 40, "internationalization" * 2, f"again {shown}", filler(200)]
    )
    body, _ = digest(text, SHAPE)
    assert IDS_OPENING not in body


def test_the_longest_names_win_when_they_do_not_all_fit():
    short = [f"pkg/mod_{n:02d}/a.py" + "x" * 10 for n in range(30)]
    long = "services/billing/adapters/stripe_webhook_handler_v2.py"
    text = "\n".join([filler(20), *short[:15], long, *short[15:], filler(300)])
    body, _ = digest(text, SHAPE)
    line = body.splitlines()[-1]
    assert line.startswith(IDS_OPENING) and long in line
    assert len(line) <= SHAPE.ids
    assert [t for t in line.removeprefix(IDS_OPENING).removesuffix("]").split() if t != long] == [
        t for t in short if t in line
    ]


def test_an_output_without_names_spends_their_share_on_its_closing():
    text = filler(400, "alpha") + "\n" + "\n".join(f"closing row {n}" for n in range(60))
    with_share, _ = digest(text, SHAPE)
    without_share, _ = digest(text, DigestShape(budget=800, head=250))
    assert IDS_OPENING not in with_share
    assert with_share == without_share


GAP = re.compile(r"^\[… ([\d,]+) chars …\]$")


def _gaps(body: str) -> list[int]:
    return [int(match.group(1).replace(",", "")) for line in body.splitlines() if (match := GAP.match(line))]


def test_digest_keeps_a_traceback_line_from_the_middle():
    text = "\n".join([filler(60), "Traceback (most recent call last):", filler(300)])
    body, _ = digest(text, SHAPE)
    assert "\nTraceback (most recent call last):\n" in body


def test_digest_lists_a_name_met_twice_once():
    name = "src/payments/ledger_client.py"
    text = "\n".join([filler(40), f"see {name}", filler(200), f"and {name} again", filler(200)])
    body, _ = digest(text, SHAPE)
    assert body.splitlines()[-1] == ids_line([name])


def test_digest_kept_and_gap_counts_add_up_to_the_output_exactly():
    text = "\n".join([filler(50), "ERROR: the ledger refused the refund", filler(120), "FAILED to settle", filler(150)])
    body, kept = digest(text, SHAPE)
    pieces = [line for line in body.splitlines() if not GAP.match(line)]
    assert len(_gaps(body)) >= 2
    assert kept + sum(_gaps(body)) == len(text)
    # Every kept piece is the output's own text, and they add up to ``kept`` with the line breaks
    # that join them (a piece's closing break is counted in ``kept``, not shown).
    assert all(piece in text for piece in pieces)
    assert sum(len(piece) for piece in pieces) <= kept <= sum(len(piece) + 1 for piece in pieces)


def test_digest_has_no_empty_piece_and_no_gap_beside_a_gap():
    for text in (
        "\n".join([filler(50), "error one", "error two", filler(200)]),
        "\n".join([filler(50), "error one", filler(1), "error two", filler(200)]),
        "x" * 5000,
        "\n".join([filler(80), ""]),
    ):
        body, _ = digest(text, SHAPE)
        lines = body.splitlines()
        assert all(line for line in lines), body
        assert not any(GAP.match(a) and GAP.match(b) for a, b in zip(lines, lines[1:])), body
    # Two kept lines side by side are joined by their line break, not parted by a gap for it.
    body, _ = digest("\n".join([filler(50), "error one", "error two", filler(200)]), SHAPE)
    assert "error one\nerror two" in body
