"""What the judges add to the core lexicon (``fast_jev_compaction.conversation.lexicon``): a few word lists.

The tool kinds and the shell-command classification are the core's, so a rule, a marker and a
judge read "a Read of src/app.py" or "a side-effecting git push" the same way.
"""

from __future__ import annotations

import re

from ..conversation.lexicon import basename, command_head, program_words, shell_kind, tool_kind

__all__ = [
    "FILEISH",
    "FILE_KINDS",
    "GENERIC_HEADS",
    "RERUNNABLE_KINDS",
    "basename",
    "command_file_terms",
    "command_head",
    "program_words",
    "shell_kind",
    "tool_kind",
]

FILEISH = re.compile(r"[\w.\-/~]*[\w\-]\.[A-Za-z0-9]{1,6}$|[\w.\-~]*/[\w.\-/]+")
FILE_KINDS = frozenset({"read", "edit"})
# Re-runnable kinds: an identical later call makes the earlier output redundant.
RERUNNABLE_KINDS = frozenset({"read", "search", "fetch", "inspect", "test_build", "todo", "shell"})
# Heads too common in prose to say anything when a later text contains them.
GENERIC_HEADS = frozenset(
    """cd cat echo ls sed awk bash sh zsh python python3 node ruby perl env find grep head tail
    printf test true""".split()
)


def command_file_terms(command: str) -> list[str]:
    terms: list[str] = []
    for token in command.split():
        token = token.strip("'\"`(),;:")
        if len(token) < 4 or token.startswith("-") or "=" in token or "://" in token:
            continue
        if FILEISH.fullmatch(token):
            base = basename(token)
            if len(base) >= 4 and base not in terms:
                terms.append(base)
    return terms
