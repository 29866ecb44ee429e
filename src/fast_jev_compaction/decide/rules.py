"""Deterministic rules that settle calls before any judge is asked.

They cover what does not depend on age or taste: what must stay (a user's answer, the output
of a call with side effects, the latest run of a test, an error not yet fixed, our own earlier
cuts) and what another call has made redundant (an identical re-run, a re-read of the same
file, an older run of the same command, a replaced TODO list). A later edit alone never makes a
read redundant: the read's lines come back as the edit's ``old_string``.

The rules are a table, checked in order; the first that applies settles the call and names
itself as the decision's reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Container, Final, Sequence

from ..conversation.lexicon import DECISION, EDIT, READ, SIDE_EFFECT, TEST_BUILD, TODO, CallShape, call_shape, command_head
from ..conversation.pairing import ToolCall, is_recent
from .decisions import DROP, KEEP, TRUNCATE, Action


# Slotted: one per call (some 100k in a long session), alive together at the compaction's peak.
@dataclass(slots=True)
class CallFacts:
    """One call as the rules see it, with what the rest of the conversation says about it."""

    call: ToolCall
    shape: CallShape
    # Whether an earlier pass cut its output (its closing note names a genuine archive file);
    # for unpinned calls only, the ones a rule may settle.
    already_cut: bool
    # Filled by ``_link``: the later calls that make this one redundant or settle its error.
    rerun_later: bool = False
    reread_later: bool = False
    newer_run_later: bool = False
    todo_replaced: bool = False
    fixed_later: bool = False


# A kept log longer than this keeps its digest instead (opening, closing, every failure and
# error line within the budget): the failure a test run ends with survives, its 50 kB of passes
# go to the archive.
LOG_CAP = 16_000
# An edit's input stays whole; its output (a numbered view of the lines around the change) is
# kept whole up to this size, past it truncated to its digest unless it is recent: the file
# itself has those lines, and the latest views are the ones the next edits quote.
EDIT_CAP = 1500


@dataclass(frozen=True)
class Rule:
    name: str
    action: Action
    applies: Callable[[CallFacts], bool]
    why: str
    # Kept whole up to this many characters; past it, truncated to its digest (None: no cap).
    cap: int | None = None
    # The cap spares calls whose output arrived in the last RECENT_MESSAGES messages.
    spares_recent: bool = False


RULES: Final[tuple[Rule, ...]] = (
    Rule("already-cut", KEEP, lambda f: f.already_cut,
         "an output an earlier pass cut already points at its saved original; it is never cut twice"),
    Rule("protect-decision", KEEP, lambda f: f.shape.kind == DECISION,
         "the user's answers and plan approvals are quoted later far above the base rate"),
    Rule("protect-edit", KEEP, lambda f: f.shape.kind == EDIT,
         "the input of an edit is the record of the change", cap=EDIT_CAP, spares_recent=True),
    Rule("protect-side-effect", KEEP, lambda f: f.shape.kind == SIDE_EFFECT,
         "a call with side effects cannot be re-run to see its output again (ids, URLs, commits)"),
    Rule("superseded-reread", DROP, lambda f: f.shape.kind == READ and f.reread_later,
         "the same file (and range) is read again later"),
    Rule("superseded-older-run", DROP, lambda f: f.shape.kind == TEST_BUILD and f.newer_run_later,
         "the same test, build or lint command runs again later"),
    Rule("superseded-todo", DROP, lambda f: f.todo_replaced,
         "a later TODO list replaces this one"),
    Rule("open-error", KEEP, lambda f: f.call.is_error and not f.fixed_later,
         "an error not yet followed by a success of the same call", cap=LOG_CAP),
    Rule("latest-run", KEEP, lambda f: f.shape.kind == TEST_BUILD and not f.newer_run_later,
         "the latest run of a test, build or lint command", cap=LOG_CAP),
    Rule("superseded-rerun", DROP, lambda f: f.rerun_later,
         "an identical call runs again later"),
)
RULE_NAMES: Final = tuple(rule.name for rule in RULES)


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: str
    action: Action


@dataclass
class _Seen:
    """What calls later than the one being looked at did, walking the calls newest first."""

    rerun_keys: set[str] = field(default_factory=set)
    ok_rerun_keys: set[str] = field(default_factory=set)
    reads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    heads: set[str] = field(default_factory=set)
    ok_heads: set[str] = field(default_factory=set)
    todo: bool = False


def _link(facts: list[CallFacts]) -> None:
    seen = _Seen()
    # Its sets at hand: read for every call, they cost an attribute look-up each otherwise.
    rerun_keys, ok_rerun_keys, reads, heads, ok_heads = (
        seen.rerun_keys, seen.ok_rerun_keys, seen.reads, seen.heads, seen.ok_heads
    )
    for fact in reversed(facts):
        shape = fact.shape
        kind, rerun_key, is_error = shape.kind, shape.rerun_key, fact.call.is_error
        if rerun_key:
            fact.rerun_later = rerun_key in rerun_keys
        if kind == READ and shape.file:
            later = reads.get(shape.file, set())
            # A later read of the whole file, or of the very same range, shows the same lines.
            fact.reread_later = "" in later or shape.span in later
        if kind == TEST_BUILD and shape.head:
            fact.newer_run_later = shape.head in heads
        if kind == TODO and rerun_key == "todo":
            fact.todo_replaced = seen.todo
        if is_error:
            # Fixed by a later success of the same call, or of a test/build run of its program
            # (a shape holds the program of test/build runs only: a failed call's is worked out here).
            head = shape.head or (command_head(shape.command) if shape.command else "")
            fact.fixed_later = bool(rerun_key) and rerun_key in ok_rerun_keys or (bool(head) and head in ok_heads)

        if rerun_key:
            rerun_keys.add(rerun_key)
            if not is_error:
                ok_rerun_keys.add(rerun_key)
        if kind == READ and shape.file and not is_error:
            reads[shape.file].add(shape.span)
        if kind == TEST_BUILD and shape.head:
            heads.add(shape.head)
            if not is_error:
                ok_heads.add(shape.head)
        if kind == TODO and rerun_key == "todo":
            seen.todo = True


def call_facts(calls: Sequence[ToolCall], cut_before: Container[str] = frozenset()) -> list[CallFacts]:
    """Facts for every completed call, in call order (pinned ones included: they supersede too);
    ``cut_before``: the tool_use_ids whose output an earlier pass cut (``compaction.cut_before``)."""
    facts = [
        CallFacts(call, call_shape(call.tool, call.input), not call.pinned and call.tool_use_id in cut_before)
        for call in calls
    ]
    _link(facts)
    return facts


def settle(facts: Sequence[CallFacts], messages_total: int) -> dict[str, Verdict]:
    """The verdict of the first applying rule, for every unpinned call some rule settles, in a
    conversation of ``messages_total`` messages."""
    verdicts: dict[str, Verdict] = {}
    for fact in facts:
        if fact.call.pinned:
            continue
        for rule in RULES:
            if rule.applies(fact):
                action = rule.action
                capped = rule.cap is not None and fact.call.result_chars > rule.cap
                if capped and not (rule.spares_recent and is_recent(fact.call, messages_total)):
                    action = TRUNCATE
                verdicts[fact.call.tool_use_id] = Verdict(rule.name, action)
                break
    return verdicts
