"""The fitted judge's features (:mod:`.features`), computed from a Jev state instead of the messages.

A judge behind the Jev protocol (``fast-jev serve``) sees a state, not the conversation: each
call's input (maybe truncated, or a one-line rendering), its result note (size, error) and, at
the first stages, a digest of its output (a few hundred characters of its ends and its most
repeated terms), plus the texts of the messages around it (maybe abridged or collapsed). Every
feature of :data:`.features.FEATURE_NAMES` is computed from that, with these gaps:

- the output's content is its digest: ``reused``, ``reused_log``, ``reuse_recency``,
  ``later_text_overlap``, ``goal_overlap``, ``prompt_overlap``, ``error_lines`` and ``ids_log``
  read the digest's lines and terms, not the whole output, and are 0 when the state carries no
  digest (one-line calls, the later fitting stages);
- later texts and inputs are as the state shows them (abridged, collapsed, inputs cut), so a
  reuse or a mention in what was cut is not seen;
- positions are message indices from the entries; a result is taken to be the message right
  after its call, and the conversation to end one message after the last call shown;
- in a windowed state the distant history is partly left out, so ``calls_after_fraction`` counts
  the calls shown and a re-read that is not shown does not supersede.

``fast-jev eval --serve`` measures what these gaps cost (docs/quality.md, "Through Jev"); the
judge behind the protocol scores them with the same model fitted on them (``judge/state_weights.json``,
``fast-jev eval --fit-state``), not with the weights fitted on whole outputs.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..conversation.messages import SessionMessage
from ..state.goal import prompt_text
from ..state.history import read_digest
from .features import _HALF_LIFE_MESSAGES, _PROMPTS_SATURATION, _TINY_CHARS, FEATURE_NAMES, error_lines, terms
from .lexicon import basename, tool_kind
from .reuse import ReuseIndex, long_ids, shingles, snippets, string_values
from .state import Question, StateCall, StateView

# Kinds whose second run is a second change, never a copy of the first output (as in features.py).
_CHANGES = frozenset({"edit", "side_effect", "decision", "agent"})


def _is_prompt(role: str, text: str) -> bool:
    return role == "user" and bool(prompt_text(SessionMessage(role="user", text=text)))


def _reuse_index(view: StateView) -> ReuseIndex:
    """Where each snippet appears in the state's reuse channels (assistant text, call inputs)."""
    index = ReuseIndex(size=view.last_index + 1)
    inputs: dict[int, list[str]] = {}
    for call in view.ordered:
        inputs.setdefault(call.pos, []).extend(string_values(call.fields))
    for entry in view.entries:
        seen: set[str] = set()
        texts = ([entry.text] if entry.role == "assistant" and entry.text else []) + inputs.get(entry.pos, [])
        for text in texts:
            seen |= snippets(text)
        index.add_channel(entry.msg_index, seen)
    for entry in view.entries:
        if entry.role == "user" and entry.text:
            index.add_user(entry.msg_index, snippets(entry.text))
    return index


def _reuses(index: ReuseIndex, lines: list[str], digest_terms: list[str], result_index: int) -> dict[str, int]:
    """:meth:`ReuseIndex.reuses` over what a digest has: shingles of its lines, ids of its lines and terms."""
    found: dict[str, int] = {}
    candidates = shingles("\n".join(lines)) | long_ids("\n".join([*lines, *digest_terms]))
    for snippet in candidates:
        key = hash(snippet)
        if index.first.get(key, index.size) <= result_index:
            continue
        latest = index.last.get(key)
        if latest is not None:
            found[snippet] = latest
    return found


def _superseded(view: StateView, call: StateCall) -> bool:
    if call.kind == "read":
        return view.later_read_of(call)
    return call.kind not in _CHANGES and view.rerun_later(call)


def _edited_unread(view: StateView, call: StateCall) -> bool:
    if call.kind != "read" or call.file is None:
        return False
    edited = False
    for other in view.later_same_file(call):
        if other.kind == "edit":
            edited = True
        elif other.kind == "read" and other.range_key in ("", call.range_key):
            edited = False
    return edited


def _share(wanted: set[str], present: set[str]) -> float:
    return len(wanted & present) / len(wanted) if wanted else 0.0


def state_features(view: StateView) -> dict[str, dict[str, float]]:
    """``{call id: {feature: value}}`` for every call the state shows."""
    last = view.last_index
    prompts = [e for e in view.entries if _is_prompt(e.role, e.text)]
    latest_prompt = prompts[-1].text if prompts else ""
    goal_terms, prompt_terms = terms(view.goal), terms(latest_prompt)
    last_said: dict[str, int] = {}
    for entry in view.entries:
        if entry.role == "assistant":
            for term in terms(entry.text):
                last_said[term] = max(last_said.get(term, -1), entry.msg_index)
    prompt_positions = {e.pos for e in prompts}
    spoken = [(e.msg_index, e.text.lower()) for e in view.entries if e.role == "assistant" or e.pos in prompt_positions]
    reuse = _reuse_index(view)

    out: dict[str, dict[str, float]] = {}
    total = len(view.ordered)
    for n, call in enumerate(view.ordered):
        if call.id in out:
            continue  # an id shown twice: the first is the one asked about
        values = dict.fromkeys(FEATURE_NAMES, 0.0)
        values.update(sized(values, call.result_chars or 0))
        values[f"kind_{call.kind}"] = 1.0
        values["is_error"] = 1.0 if call.is_error else 0.0
        result_index = min(call.msg_index + 1, last)
        since = last - result_index
        values["age_fraction"] = since / last if last else 0.0
        values["calls_after_fraction"] = (total - 1 - n) / total
        values["recency"] = 0.5 ** (since / _HALF_LIFE_MESSAGES)
        after = sum(1 for p in prompts if p.msg_index > result_index)
        values["prompts_after"] = min(after, _PROMPTS_SATURATION) / _PROMPTS_SATURATION
        values["superseded"] = 1.0 if _superseded(view, call) else 0.0
        values["edited_unread"] = 1.0 if _edited_unread(view, call) else 0.0

        lines, digest_terms = read_digest(call.digest) if call.digest else ([], [])
        reused = _reuses(reuse, lines, digest_terms, result_index)
        if reused:
            values["reused"] = 1.0
            values["reused_log"] = math.log1p(len(reused))
            latest = max(reused.values())
            values["reuse_recency"] = 0.5 ** (max(0, last - latest) / _HALF_LIFE_MESSAGES)
        body = "\n".join(lines)
        output_terms = terms("\n".join([body, *digest_terms]))
        said_later = {t for t in output_terms if last_said.get(t, -1) > result_index}
        values["later_text_overlap"] = len(said_later) / len(output_terms) if output_terms else 0.0
        values["goal_overlap"] = _share(goal_terms, output_terms)
        values["prompt_overlap"] = _share(prompt_terms, output_terms)
        name = basename(call.file.path).lower() if call.file is not None and not call.file.cut else ""
        if len(name) >= 4 and any(at > result_index and name in text for at, text in spoken):
            values["target_mentioned_later"] = 1.0
        values["error_lines"] = math.log1p(min(error_lines(body), 50))
        values["ids_log"] = math.log1p(len(long_ids("\n".join([body, *digest_terms]))))
        out[call.id] = values
    return out


def question_features(question: Question) -> dict[str, float]:
    """What a question alone says about a call the state does not show: its tool and size."""
    values = dict.fromkeys(FEATURE_NAMES, 0.0)
    kind = tool_kind(question.tool, {}) if question.tool else "other"
    values[f"kind_{'other' if kind == 'shell' else kind}"] = 1.0  # a shell call whose command is unseen
    return sized(values, question.chars) if question.chars is not None else values


def sized(values: Mapping[str, float], chars: int) -> dict[str, float]:
    """``values`` with the size features of an output of ``chars`` characters."""
    return {**values, "size_log": math.log10(chars + 1), "tiny": 1.0 if chars <= _TINY_CHARS else 0.0}

