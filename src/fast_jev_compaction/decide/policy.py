"""Which judged calls to cut: the outputs that free the most, least valuable first, up to a target.

A single probability cliff flips a call between keep and drop on tiny score changes, and judges
answer on their own scales. The budget policy cuts, least valuable first, until its target is
freed (rules' cuts count towards it), never an output valued at ``keep_floor`` or more. With a
window (``options.window_tokens``) the target is what brings the context under
``target_percent`` of it (``chars_to_free``): a context already under it loses nothing, and when
the cuts below cannot reach it, every other judged output is cut too, least valuable first
(``further``; the ladder's rung a). Without a window the target is ``target_reduction`` of the
judged outputs' characters (the default, 90 %), whatever the context's size. The cuts:

- an output longer than its cut-over is truncated to its digest; the cut-over falls with the
  output's age (``cut_over``): ``RECENT_CUT_CHARS`` in the last ``pairing.RECENT_MESSAGES``
  messages, ``CUT_CHARS`` up to ``OLD_MESSAGES`` back, ``OLD_CUT_CHARS`` past that;
- an output the judge values under ``CHEAP``, not recent, of ``MIN_DROP_CHARS`` to
  ``CHEAP_MAX_CHARS``, is cut too: truncated when its digest frees something, else dropped with
  its call, a marker standing where it was.

Every cut output is archived whole, and ``could_cut`` says which calls the policy may cut before
any judge is asked.

The numbers come from ``fast-jev eval`` on the corpus (fire points at 40/60/80 % of 60
sessions, 255 outputs reused after the fire point), as result chars removed of the unpinned
calls / reused outputs gone. The parameters were chosen on the *tune* half of the sessions and
then measured on the other, *check* half (``evaluation.corpus.session_split``: a hash of each
session's file name; ``docs/quality.md`` shows both halves):

==============================================  =============  =============  =============
policy                                           all            tune           check
==============================================  =============  =============  =============
cut over 6,000, 1,600-char digests (before)      53 % / 5.1 %   49 % / 4.7 %   57 % / 6.0 %
same, 800-char digests with a line of ids        55 % / 5.5 %   51 % / 5.2 %   59 % / 6.0 %
cut over 5,000 (6,000 when recent)               58 % / 5.5 %   53 % / 5.2 %   62 % / 6.0 %
and cheap outputs cut (judge under 0.05)         60 % / 5.5 %   56 % / 5.2 %   63 % / 6.0 %
and edit outputs over 1,500 cut                  61 % / 5.5 %   59 % / 5.2 %   64 % / 6.0 %
and over 4,000 past 60 messages (the defaults)   63 % / 5.5 %   61 % / 5.2 %   65 % / 6.0 %
the defaults without the line of ids             62 % / 5.9 %   60 % / 5.8 %   65 % / 6.0 %
the defaults, cheap under 0.15                   65 % / 5.9 %   63 % / 5.2 %   67 % / 7.2 %
cut over 4,000 at every age                      68 % / 11 %    63 % / 6.4 %   72 % / 22 %
==============================================  =============  =============  =============

Each step was kept when it lost no more on the tune half; where several settings tied on loss
(cheap under 0.05 to 0.2, an old tier from 30 to 80 messages and 2,000 to 4,000 chars), the
most cautious that reached 60 % on the tune half was taken. The check column was looked at
during the exploration too, so it is a check, not a blind test.

What is lost at the defaults is almost only large reads of code that later edits quote line by
line: no digest holds those (1,600-char digests lose one output fewer than 800-char ones, and
free 2 points less), and neither the judge (over 2,000 chars its ranking of them is near chance)
nor recency picks them out, so the cut-over's size does the work. Protecting what the judge
values most (``keep_floor``) kept those very outputs whole and lost more at every removal level:
a reused output is most often a large one. Among small outputs the judge is reliable (AUC 0.97
on reuse under 1,000 chars), hence ``CHEAP``; it spares recent outputs and stops at
``CHEAP_MAX_CHARS``, where a digest would start cutting values out of the middle of fetched docs
and config reads. ``keep_threshold`` (the threshold policy) stays for those who want the old
cliff.

The variance across sessions (``docs/quality.md``, "Variance across sessions") is wide: the
gone share of five folds of sessions runs from about 2 % to 9 %, a bootstrap over sessions
puts 90 % of it between about 3 % and 9 %, and the check half's 6.0 % is 5 of 83 outputs. Every
output lost at the defaults is a Read of 6,000 to 52,000 characters, most of them recent or of a
file the user or the assistant named since (the page's signs table: those signs mark 13 of the
14 losses and two thirds of the cut characters). Keeping such reads whole was tried, chosen on
the tune half, and not taken: each loss saved on the tune half cost one to four points of the
removal, and none reached 60 % on the tune half:

==============================================  =============  =============  =============
tried after the defaults                         all            tune           check
==============================================  =============  =============  =============
recent reads kept up to 12,000                   62 % / 4.7 %   58 % / 4.1 %   65 % / 6.0 %
recent reads of a file edited since kept         60 % / 4.7 %   55 % / 4.1 %   65 % / 6.0 %
reads of a file edited since, up to 20,000       56 % / 4.7 %   53 % / 4.1 %   59 % / 6.0 %
reads of a file named since, up to 20,000        55 % / 3.5 %   53 % / 3.5 %   57 % / 3.6 %
``keep_floor`` 0.9                               57 % / 5.1 %   58 % / 4.7 %   57 % / 6.0 %
reads with no sign, over 3,000 unless recent     65 % / 8.2 %   61 % / 5.2 %   70 % / 15 %
outputs other than reads cut over 3,000          66 % / 9.4 %   64 % / 9.3 %   67 % / 9.6 %
==============================================  =============  =============  =============

The last two rows are the compensations tried, to buy the removal back elsewhere; the first of
them loses nothing more on the tune half and seven more outputs on the check half, the fit to
the corpus this page guards against. The folds are not blind to the judge either (its weights
are fitted on every session), but the judge only picks the cheap cuts here: without them the
same 14 outputs are lost, at 61 % removed (58 % on the tune half).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..conversation.pairing import ToolCall, is_recent, messages_since
from ..conversation.sizes import input_chars
from ..options import CompactOptions
from .decisions import BUDGET, DROP, KEEP, TRUNCATE, Action, CallDecision, decide_call

# Outputs up to these sizes stay whole under the budget policy (see the table above): recent ones
# (pairing.is_recent), then those up to OLD_MESSAGES messages back, then older ones.
RECENT_CUT_CHARS = 6000
CUT_CHARS = 5000
OLD_MESSAGES = 60
OLD_CUT_CHARS = 4000
# An output the judge values under this is cut under its cut-over too, unless recent...
CHEAP = 0.05
# ... from this size (below it, the marker that replaces a dropped call eats most of the saving)
# up to this one (the judge ranks small outputs best; past it a digest starts to cut values out
# of the middle of fetched docs and config reads).
MIN_DROP_CHARS = 300
CHEAP_MAX_CHARS = 2000


# Characters per token of a Claude Code conversation (code, logs and JSON): an estimate that
# turns a window's tokens into the characters a pass must free, and freed characters into points.
CHARS_PER_TOKEN = 3.5
# A pass aims this many points under its target, so the next turn does not cross it at once.
TARGET_MARGIN_POINTS = 2.0
# What an attached image or document costs the context, in tokens: an estimate (the messages'
# characters leave them out). The API scales an image to fit about 1.15 megapixels, some 1,600
# tokens at most; a document's page costs about as much as a full-size image.
MEDIA_TOKENS = 1600
MEDIA_CHARS = round(MEDIA_TOKENS * CHARS_PER_TOKEN)


def context_tokens(chars: int, options: CompactOptions) -> float:
    """The context's size in tokens: the engine's count when it gave one, else estimated."""
    return options.context_tokens or chars / CHARS_PER_TOKEN


def chars_to_free(chars_before: int, options: CompactOptions) -> float | None:
    """The characters a pass must free to bring a context of ``chars_before`` characters of
    messages under ``target_percent`` of the window, with a small margin; None without a window."""
    if options.window_tokens <= 0:
        return None
    target = options.window_tokens * max(0.0, options.target_percent - TARGET_MARGIN_POINTS) / 100
    return max(0.0, (context_tokens(chars_before, options) - target) * CHARS_PER_TOKEN)


# Rules that keep a call's input whole too, not only its output: the user's answers (the
# questions asked), an error not yet fixed and the latest run (the command the next step
# repeats). Rung b of the ladder leaves these calls' inputs alone. Not among them: an edit, whose
# body is what rung b moves to the archive (the file on disk holds the current content), and a
# call with side effects, kept whole for its output, which cannot be had again (ids, URLs); its
# input is most often a heredoc into a file or a commit message, which the file or the history
# holds.
INPUT_KEEPING_RULES = frozenset({"protect-decision", "open-error", "latest-run"})


def cut_over(call: ToolCall, messages_total: int) -> int:
    """The size over which the budget policy may cut ``call``'s output, whatever its value."""
    if is_recent(call, messages_total):
        return RECENT_CUT_CHARS
    return CUT_CHARS if messages_since(call, messages_total) < OLD_MESSAGES else OLD_CUT_CHARS


def could_cut(call: ToolCall, messages_total: int, options: CompactOptions, *, remote: bool = False) -> bool:
    """Whether the policy in ``options`` may cut ``call`` (one of ``messages_total`` messages),
    for some answer of the judge; a call it could not cut needs no answer. Rules settle some calls
    before this matters (``rules.settle``); the threshold policy may cut every unpinned call.

    ``remote=True`` answers for a judge asked over the wire, whose answers are remembered across
    passes. It leaves out the small outputs that only a very low answer cuts: their questions cost
    more tokens than their cuts free (on a ~200k-token session they took a compaction from ~14k to
    ~76k tokens, for about 2 points of the unpinned output on the corpus). And it takes the lowest
    cut-over whatever the call's age: an output only grows older, so its answer is had once, not
    asked anew by a later pass when it crosses into a lower cut-over."""
    if call.pinned:
        return False
    if options.policy == "threshold":
        return True
    # The floor bounds every cut: at 0 no answer is low enough.
    if options.keep_floor <= 0:
        return False
    if remote:
        return call.result_chars > min(RECENT_CUT_CHARS, CUT_CHARS, OLD_CUT_CHARS)
    return call.result_chars > cut_over(call, messages_total) or _may_be_cheap(call, messages_total)


def _may_be_cheap(call: ToolCall, messages_total: int) -> bool:
    """Whether ``call`` is cut if the judge values it under ``CHEAP``."""
    return MIN_DROP_CHARS <= call.result_chars <= CHEAP_MAX_CHARS and not is_recent(call, messages_total)


@dataclass(frozen=True, slots=True)
class Scored:
    call: ToolCall
    keep_call: float
    keep_result: float


def threshold_decisions(scored: Sequence[Scored], keep_threshold: float) -> list[CallDecision]:
    return [decide_call(s.call, (s.keep_call, s.keep_result), keep_threshold) for s in scored]


_FURTHER_CUTS: tuple[Action, ...] = (TRUNCATE, DROP)


def budget_decisions(
    scored: Sequence[Scored],
    *,
    target_chars: float,
    already_freed: float,
    keep_floor: float,
    freed_by: Callable[[ToolCall, Action], int],
    messages_total: int,
    further: bool = False,
) -> list[CallDecision]:
    """Decide every scored call: cut the least valuable until the target is met.

    ``further`` (a pass with a window): when the outputs over their cut-over and the cheap ones
    fall short of the target, every other output valued under ``keep_floor`` is cut too, least
    valuable first, until the target is met: truncated where its digest frees something, else
    dropped with its call.
    """
    order = sorted(scored, key=lambda s: (s.keep_result, s.keep_call, -s.call.result_chars, s.call.id))
    freed = already_freed
    actions: dict[str, Action] = {}
    for item in order:
        call = item.call
        action: Action = KEEP
        cheap = item.keep_result < CHEAP and _may_be_cheap(call, messages_total)
        cut = cheap or call.result_chars > cut_over(call, messages_total)
        if cut and freed < target_chars and item.keep_result < keep_floor:
            # A cheap output too short for a digest that pays leaves with its call.
            for candidate in (TRUNCATE, DROP) if cheap else (TRUNCATE,):
                gained = freed_by(call, candidate)
                if gained > 0:
                    action = candidate
                    freed += gained
                    break
        actions[call.tool_use_id] = action
    if further:
        for item in order:
            if freed >= target_chars:
                break
            call = item.call
            if actions[call.tool_use_id] == KEEP and item.keep_result < keep_floor:
                # An output too short for a digest that pays leaves with its call, its marker
                # naming the saved file: the window needs the room, and it is the least valued.
                # Not a call with a long input: a drop saves the output only, and such an input
                # is rung b's, which moves it to the archive whole.
                cuts = _FURTHER_CUTS if input_chars(call.input) <= MIN_DROP_CHARS else (TRUNCATE,)
                for further_cut in cuts:
                    gained = freed_by(call, further_cut)
                    if gained > 0:
                        actions[call.tool_use_id] = further_cut
                        freed += gained
                        break
    return [
        CallDecision(s.call.id, s.call.tool_use_id, s.call.tool, s.keep_call, s.keep_result, actions[s.call.tool_use_id], BUDGET)
        for s in scored
    ]
