"""``fast-jev``: the command-line entry point. Each sub-command lives in ``commands/``.

Every failure the user can cause ends in one line on stderr and a documented exit code
(``errors.EXIT_*``): 0 done, 1 the judge or the budget failed, 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shlex
import sys
from typing import NoReturn

from .errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED

# name -> module under fast_jev_compaction.commands exposing add_parser(subparsers)
_COMMANDS = ("compact", "serve", "log", "stats", "report", "bench", "eval")
_MODULES = {"compact": "compact", "serve": "serve", "log": "audit", "stats": "audit", "report": "report", "bench": "bench", "eval": "eval"}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the flag and where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fast-jev-compaction")
    except PackageNotFoundError:  # running from a source tree
        from . import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="fast-jev",
        description="Compact Claude Code sessions by deciding, per tool call, what stays verbatim.",
    )
    parser.add_argument("--version", action="version", version=f"fast-jev {_version()}")
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


def _with_stdin_arguments(parser: argparse.ArgumentParser, argv: list[str], command: str) -> list[str]:
    """``argv`` with the shell words read from stdin right after the sub-command's name, so the
    options ``argv`` itself gives after it (a slash command's bounds) come last and win."""
    try:
        words = shlex.split(sys.stdin.read())
    except ValueError as exc:  # an unclosed quote
        parser.error(f"the {command} arguments on stdin are not shell words ({exc})")
    at = argv.index(command) + 1
    return [*argv[:at], *words, *argv[at:]]


def _tolerant_output() -> None:
    """A character the terminal's encoding lacks (a Latin-1 locale and a "→") is printed as an
    escape instead of ending the command in a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    command = "fast-jev"
    _tolerant_output()
    try:
        parser = build_parser()
        argv = sys.argv[1:] if argv is None else argv
        try:
            args = parser.parse_args(argv)
            if getattr(args, "arguments_on_stdin", False):
                args = parser.parse_args(_with_stdin_arguments(parser, argv, args.command))
        except SystemExit as done:  # --help, --version, or a usage error already printed
            return int(done.code or 0) if not isinstance(done.code, str) else EXIT_BAD_INPUT
        command = f"fast-jev {args.command}"
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"\n{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `fast-jev log | head`: the reader has what it wanted
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a bug: one line, and the traceback on request
        if os.environ.get("FAST_JEV_DEBUG"):
            raise
        print(f"{command}: internal error ({type(exc).__name__}: {exc}); set FAST_JEV_DEBUG=1 to see "
              "the traceback, and please report it", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
