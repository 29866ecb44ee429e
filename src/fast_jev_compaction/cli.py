"""``fast-jev``: the command-line entry point. Each sub-command lives in ``commands/``."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> module under fast_jev_compaction.commands exposing add_parser(subparsers)
_COMMANDS = ("compact", "serve", "log", "stats", "report", "bench", "eval")
_MODULES = {"compact": "compact", "serve": "serve", "log": "audit", "stats": "audit", "report": "report", "bench": "bench", "eval": "eval"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fast-jev",
        description="Compact Claude Code sessions by deciding, per tool call, what stays verbatim.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    seen: set[str] = set()
    for name in _COMMANDS:
        module_name = _MODULES[name]
        if module_name in seen:
            continue
        seen.add(module_name)
        try:
            module = importlib.import_module(f"fast_jev_compaction.commands.{module_name}")
        except ModuleNotFoundError as exc:  # a sub-command not built yet
            if exc.name != f"fast_jev_compaction.commands.{module_name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
