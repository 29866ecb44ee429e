"""The digest's line of ids: the names a later turn reuses, kept when the lines holding them are not."""

from __future__ import annotations

from fast_jev_compaction.digest import DigestShape, digest
from fast_jev_compaction.markers import ids_line

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
