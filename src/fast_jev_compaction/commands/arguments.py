"""Argument types the sub-commands share (argparse ``type=`` callables)."""

from __future__ import annotations

import argparse
from typing import Callable


def whole_number(minimum: int, bound: str | None = None) -> Callable[[str], int]:
    """A whole number of at least ``minimum``; ``bound`` says the limit in the error's words."""
    least = bound or f"at least {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {least}, got {value}")
        return value

    return parse


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db``: the decision log the reading commands open (``fast-jev log``, ``stats``, ``report``)."""
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="decision log file (default: $FAST_JEV_DB, $CLAUDE_PLUGIN_DATA/decisions.sqlite, "
        "or the plugin data dir under ~/.claude)",
    )
