"""The fast paths give exactly what the plain forms they replace give.

Each speed-up of the core and the judge keeps a slower, obvious reference here (the regex, the
whole render, the full walk) and checks the two agree on generated and hand-picked inputs.
``scripts/decisions_snapshot.py`` checks the same end to end on the corpus.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fast_jev_compaction.conversation.messages import SessionMessage
from fast_jev_compaction.conversation.pairing import is_pinned, pair_tool_calls
from fast_jev_compaction.conversation.transcript import parse_transcript
from fast_jev_compaction.errors import FittingError
from fast_jev_compaction.evaluation.synthetic import transcript_lines
from fast_jev_compaction.judge.features import error_lines, terms
from fast_jev_compaction.judge.reuse import (
    build_reuse_index,
    channel_texts,
    long_ids,
    normalized_words,
    shingles,
    snippets,
    word_set,
)
from fast_jev_compaction.state.fitting import (
    DETAILED_STAGES,
    INPUT_STAGES,
    _Budget,
    _floor_tokens,
    entry_tokens,
    fit_state,
    item_tokens,
)
from fast_jev_compaction.state.goal import goal_from_messages
from fast_jev_compaction.state.history import (
    TERM_SCAN_CHARS,
    RenderMemo,
    _is_term,
    _term_counts,
    _top_terms,
    history_entries,
    input_json,
)
from fast_jev_compaction.state.tokens import _accumulated, estimate_tokens, from_tally, json_tally, most_tokens, tally
from fast_jev_compaction.textutil import (
    _JS_ENCODER,
    _PLAIN_ENCODER,
    _js_encode,
    _plain_encode,
    collapse_spaces,
    has_lone_surrogate,
    js_json,
    plain_json,
    truncate,
)

# Pieces that exercise every class: ASCII letters and digits, JSON punctuation, JavaScript-only
# spaces, non-ASCII letters (word characters the ASCII tables cannot see), astral characters.
_ALPHABET = st.sampled_from(
    list("aZ_9 .,-/:\"{}[]\n\t\u2192\u2026\u00e9\u0130\u017f\u3000\ufeff\x1c@~+=%")
    + ["\U0001F600", "error", "Failed", "not found", "abcdefgh", "0x1f2e3d4c5b6a", "https://a.example/x"]
    # error words spelled with the non-ASCII letters IGNORECASE folds to ASCII ones (ſ ı K İ)
    + ["a\u017f\u017fert", "exceptıon", "traceback".replace("k", "\u212a"), "deN\u0130ed", "1x_2Ab"]
)
_TEXT = st.lists(_ALPHABET, max_size=120).map("".join)


# -- tokens --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=6))
def test_tallies_of_json_fragments_add_up_to_the_whole(texts: list[str]) -> None:
    """What fitting relies on: a JSON array's tally is its items' tallies plus its punctuation,
    and the estimate follows from the tally whenever from_tally says so."""
    whole = plain_json(texts)
    parts = [tally(plain_json(text)) for text in texts]
    punctuation = 2 + len(texts) - 1
    assert tally(whole) == (sum(t for t, _ in parts) + 9 * punctuation, sum(o for _, o in parts) + punctuation)
    known = from_tally(*tally(whole))
    assert known is None or known == estimate_tokens(whole) == _accumulated(whole)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_TEXT, st.text(), st.lists(st.sampled_from(["a", ".", "9", " ", "\U0001F600", "abcdefg"]), max_size=80).map("".join)))
def test_the_ordered_estimate_is_the_estimate(text: str) -> None:
    """What entry_tokens falls back on when the tally leaves the estimate undecided: the pieces
    added in order, the same estimate as the whole one for any text."""
    from fast_jev_compaction.state.tokens import ordered_estimate

    assert ordered_estimate(text) == estimate_tokens(text) == _accumulated(text)


# Long texts of every kind of piece: their sums pass many powers of two, where float additions
# start rounding to a coarser step.
_LONG_TEXT = st.lists(
    st.sampled_from(["a", ".", "9", " ", "abcdefg", "12345", "\U0001F600", "\u2026", "\xa0", "\ufeff", "\ud83d", '"', "\n"]),
    min_size=200,
    max_size=3000,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_LONG_TEXT, st.text(), st.text(alphabet=st.characters(blacklist_categories=()))))
@example("." * 10)
@example("\U0001F600" * 700 + "ab" * 300)
@example('{"id":"toolu_01","tool":"Bash","input":"{\\"command\\":\\"ls -la\\"}","result":"12 lines"},' * 40)
def test_the_ordered_estimate_adds_the_pieces_one_by_one(text: str) -> None:
    """ordered_estimate, whatever the tally: upstream's regex pieces added one by one in float."""
    from fast_jev_compaction.state.tokens import ordered_estimate

    assert ordered_estimate(text) == _accumulated(text)


def _plain_unit_classes(text: str) -> bytes:
    """The plain form of tokens._unit_classes: each character classed alone, an astral one twice."""
    from fast_jev_compaction.state.tokens import _JS_SPACE

    spaces = re.compile(f"[{_JS_SPACE}]")
    classes = bytearray()
    for char in text:
        if char.isascii() and char.isalpha():
            classes += b"a"
        elif char.isascii() and char.isdigit():
            classes += b"0"
        elif spaces.match(char):
            classes += b" "
        else:
            classes += b".." if ord(char) > 0xFFFF else b"."
    return bytes(classes)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_LONG_TEXT, st.text(alphabet=st.characters(blacklist_categories=()))))
def test_unit_classes_through_utf8_are_the_plain_classes(text: str) -> None:
    from fast_jev_compaction.state.tokens import _unit_classes

    assert _unit_classes(text) == _plain_unit_classes(text)


# Runs either side of the 6-letter blocks, digits, JavaScript-only spaces (which Python's \\s
# does not know or knows apart), astral and lone-surrogate characters, the empty text.
_TALLY_TEXT = st.lists(
    st.sampled_from(
        ["", "abcdef", "abcdefg", "a" * 12, "B" * 13, "a" * 5, "7", "0123456789", " ", ".", "\n", '"', "\\"]
        + ["\ufeff", "\u2028", "\u2029", "\xa0", "\u3000", "\u1680", "\u200a", "\x1c", "\x85", "\u0663"]
        + ["\U0001F600", "\ud83d", "\ude00", "\u00e9", "\u2026", "\u23ce", "\ue07f"]
        # UTF-8 continuation bytes that end a JavaScript space elsewhere: A0 (\u20a0, \u0420),
        # two of them (\U0001F6A8, \u2080), one (\u205e, \u2192, \u2500)
        + ["\u20a0", "\u0420", "\U0001F6A8", "\u2080", "\u205e", "\u2192", "\u2500"]
    ),
    max_size=40,
).map("".join)


def _regex_tally(text: str) -> tuple[int, int]:
    """The plain form of tokens.tally: upstream's regex pieces, costed one by one in tenths."""
    from fast_jev_compaction.state.tokens import _PIECE

    tenths = others = 0
    for letters, digits, other in (m.groups() for m in _PIECE.finditer(text)):
        if letters is not None:
            tenths += 10 * (1 + (len(letters) - 1) // 6)
        elif digits is not None:
            tenths += 5 * len(digits)
        else:
            count = 2 if ord(other) > 0xFFFF else 1
            tenths, others = tenths + 9 * count, others + count
    return tenths, others


@settings(max_examples=1000, deadline=None)
@given(st.one_of(_TALLY_TEXT, _TEXT, st.text()))
@example("")
@example("abcdefabcdef abcdefabcdefg \ufeff\u2028\U0001F600 12")
def test_the_counted_tally_is_the_regex_tally(text: str) -> None:
    """tokens.tally counts class bytes (a non-ASCII text through its UTF-8 bytes, the non-ASCII
    characters apart) and keeps short texts' tallies: the same as the pieces one by one, asked
    once or again."""
    reference = _regex_tally(text)
    assert tally(text) == reference
    assert tally(text) == reference
    assert estimate_tokens(text) == _accumulated(text)


# Every character JSON escapes: with a letter (\\n, \\t, \\r, \\b, \\f), doubled (" and \\), in
# hexadecimal (the other controls), and lone surrogates; next to letter runs either side.
_JSON_TEXT = st.one_of(
    _TALLY_TEXT,
    _TEXT,
    st.text(),
    st.lists(
        st.sampled_from(
            ["\n", "\t", "\r", "\b", "\f", '"', "\\", "\x00", "\x0b", "\x1b", "\x1f", "\x7f", "\ud800", "\udfff"]
            + ["abcde", "abcdef", "n", "u", "00", "9", " ", ".", "\u23ce", "\u2026", "\xa0", "\U0001F600"]
        ),
        max_size=40,
    ).map("".join),
)


@settings(max_examples=1000, deadline=None)
@given(_JSON_TEXT)
@example('a"b\\c\nd\tabcdef\rabcde\bx\fy')
@example("abc\nabcdef")
@example("\x1bbold")
def test_the_json_tally_is_the_tally_of_the_json(text: str) -> None:
    """tokens.json_tally counts a text as its JSON shows it without writing the JSON: the same
    as the written JSON's tally, asked once or again (short texts are kept)."""
    assert json_tally(text) == tally(plain_json(text))
    assert json_tally(text) == tally(plain_json(text))


_RENDERED = st.one_of(
    st.dictionaries(st.sampled_from(["id", "tool", "input", "result", "digest", "k\n\u00e9"]), _JSON_TEXT, max_size=5),
    st.deferred(lambda: st.dictionaries(_TEXT, _JSON_VALUE, max_size=4)),
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_RENDERED, _JSON_TEXT))
def test_the_memo_tally_is_the_tally_of_the_json(value: dict | str) -> None:  # type: ignore[type-arg]
    """RenderMemo.tally adds a rendered call's keys and texts up instead of writing it (and a
    dict of other values, nested ones too, is written): the same as the written JSON's tally."""
    memo = RenderMemo()
    assert memo.tally(value) == tally(plain_json(value))
    assert memo.tally(value) == tally(plain_json(value))


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_most_tokens_bounds_the_estimate(text: str) -> None:
    assert estimate_tokens(text) <= most_tokens(text)


# -- judge: snippets, ids, terms, error lines ----------------------------------------------------

_WORD = re.compile(r"\w+")
_LINE_NUMBER = re.compile(r"^[ \t]*\d+(?:→|\t)", re.MULTILINE)
_ID = re.compile(r"[\w\-./~@+=%]{24,}")
_URL = re.compile(r"https?://[^\s\"'<>()\[\]{}`]+")
_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_ERROR_LINE = re.compile(
    r"^.*\b(?:error|exception|traceback|failed|failure|fatal|panic|assert(?:ion)?|denied|not found)\b.*$",
    re.IGNORECASE | re.MULTILINE,
)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_words_and_id_runs_match_the_patterns(text: str) -> None:
    assert normalized_words(text) == _WORD.findall(_LINE_NUMBER.sub("", text).lower())
    assert long_ids(text) == _long_ids_reference(text)


def test_lower_casing_leaves_a_non_word_character_one_non_ascii_character() -> None:
    """What lower-casing ASCII bytes instead of the text relies on (reuse._ascii_runs)."""
    for code in range(0x80, 0x110000):
        char = chr(code)
        if not char.isalnum() and not 0xD800 <= code < 0xE000:
            lowered = char.lower()
            assert len(lowered) == 1 and not lowered.isascii() and not lowered.isalnum(), hex(code)


def _long_ids_reference(text: str) -> set[str]:
    found = {token for m in _URL.finditer(text) if len(token := m.group(0).rstrip(".,;:")) >= 24}
    for token in (run.strip(".,-/") for run in _ID.findall(text)):
        if len(token) >= 24 and re.search(r"[0-9/_\-]", token) and len(re.findall(r"[A-Za-z0-9]", token)) >= 8:
            found.add(token)
    return found


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_error_lines_and_terms_match_the_patterns(text: str) -> None:
    assert error_lines(text) == len(_ERROR_LINE.findall(text))
    from fast_jev_compaction.judge.features import _FOLDS_TO_ASCII, _error_lines_lowered, _error_lines_searched

    # The lower-cased count where error_lines takes it: the same as the plain search.
    if _FOLDS_TO_ASCII.search(text) is None:
        assert _error_lines_lowered(text.lower()) == _error_lines_searched(text)
    from fast_jev_compaction.judge.features import _STOP_TERMS

    assert terms(text) == {t for t in (m.lower() for m in _TERM.findall(text)) if t not in _STOP_TERMS}


def _windows_reference(text: str) -> set[str]:
    words = normalized_words(text)
    return {
        " ".join(words[start : start + 8])
        for start in range(len(words) - 7)
        if sum(map(len, words[start : start + 8])) + 7 >= 30 and sum(len(w) >= 3 for w in words[start : start + 8]) >= 3
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["alpha", "beta", "gamma", "de", "x", "éclair", "ok", "\u0130stanbul", "9"]), max_size=40))
def test_shingles_are_the_joined_windows(words: list[str]) -> None:
    assert shingles(" ".join(words)) == _windows_reference(" ".join(words))


def _plain_reuses(messages: list[SessionMessage]) -> Callable[[str, int], dict[str, int]]:
    """The reuse index as plain text: every snippet a string key with all its positions."""
    occurrences: dict[str, list[int]] = {}
    first_seen: dict[str, int] = {}
    for position, message in enumerate(messages):
        for snippet in set().union(*map(snippets, channel_texts(message))):
            occurrences.setdefault(snippet, []).append(position)
            first_seen.setdefault(snippet, position)
        if message.role == "user" and message.text:
            for snippet in snippets(message.text):
                first_seen.setdefault(snippet, position)

    def reuses(output: str, result_index: int) -> dict[str, int]:
        return {
            s: occurrences[s][-1]
            for s in snippets(output)
            if first_seen.get(s, len(messages)) > result_index and occurrences.get(s)
        }

    return reuses


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_word_set_holds_every_normalized_word(text: str) -> None:
    assert set(normalized_words(text)) <= word_set([text])


def test_reuses_finds_what_a_full_scan_finds() -> None:
    """The hashed index, which builds an output's windows only where an indexed shingle starts,
    finds what a plain string-keyed scan of every snippet finds."""
    messages = parse_transcript(list(transcript_lines(400)))
    # the generated session never quotes an output: later replies quote some, a prompt one
    outputs = [r.text for m in messages for r in m.toolResults or () if len(r.text) > 200]
    messages += [SessionMessage(role="assistant", text=text[50:400]) for text in outputs[::7]]
    messages.append(SessionMessage(role="user", text=outputs[3][:300]))
    index = build_reuse_index(messages)
    plain = _plain_reuses(messages)
    found = 0
    for position, message in enumerate(messages):
        for result in message.toolResults or ():
            assert index.reuses(result.text, position) == plain(result.text, position)
            found += bool(plain(result.text, position))
    assert found
    # indexed only for some outputs' words, it answers for those outputs as the whole index does
    asked = [(position, r.text) for position, m in enumerate(messages) for r in m.toolResults or ()][::3]
    narrow = build_reuse_index(messages, word_set(text for _, text in asked))
    assert len(narrow.first) < len(index.first)
    for position, text in asked:
        assert narrow.reuses(text, position) == plain(text, position)


_PHRASES = [
    "the parser reads every header before the body",
    "error: connection refused on port 8080 retrying",
    "src/fast_jev_compaction/judge/reuse_index_file.py",
    "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
    "please keep the parser reads every header before",
    "ok",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant"]), st.lists(st.sampled_from(_PHRASES), max_size=4)),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.sampled_from(_PHRASES), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=12),
)
def test_hashed_reuses_match_the_plain_index(
    turns: list[tuple[str, list[str]]], output_phrases: list[str], result_index: int
) -> None:
    """On drawn conversations (user text shadowing assistant text, ids, repeated shingles) the
    hashed index gives the plain index's matches and last positions."""
    messages = [SessionMessage(role=role, text=" ".join(phrases)) for role, phrases in turns]
    output = " ".join(output_phrases)
    expected = _plain_reuses(messages)(output, result_index)
    assert build_reuse_index(messages).reuses(output, result_index) == expected
    assert build_reuse_index(messages, word_set([output])).reuses(output, result_index) == expected


# -- digest terms --------------------------------------------------------------------------------


_TOP_WORDS = ["parse_header", "readFile", "abcdefgh", "src/a.py", "version2", "Zebra_x"]
# letters only: all lower case, title case, all upper case, camel case, non-ASCII ones
_TOP_WORDS += ["Abcdefgh", "ABCDEFGH", "aBcdefgh", "AbcdefgH", "\u00e9l\u00e9ment", "\u00c9l\u00e9ment", "\u00e9L\u00e9ment", "Ab\u00e9cdef"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_TOP_WORDS), st.text("aZ_9.-/\u00e9E", min_size=7, max_size=9)), max_size=30))
def test_top_terms_are_the_most_repeated_terms(words: list[str]) -> None:
    counts = Counter(words)
    kept = [term for term in counts if _is_term(term)]
    as_bytes = Counter({term.encode(): times for term, times in counts.items()})
    assert _top_terms(as_bytes) == " ".join(sorted(kept, key=lambda t: (-counts[t], t))[:8])
    # _term_counts leaves a few stripped runs shorter than a term beside the terms: none is chosen
    with_short = Counter({**as_bytes, b"ab.c": 99, b"x_1": 50, b"": 7, b"Ab": 6, b"a": 5})
    assert _top_terms(with_short) == _top_terms(as_bytes)



_JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _TEXT | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_TEXT, _JSON_VALUE | st.text(min_size=990, max_size=1100), max_size=5), st.sampled_from([1, 60, 200, 999, 1000]))
def test_inputs_cut_before_rendering_render_as_the_whole(value: dict, limit: int) -> None:  # type: ignore[type-arg]
    """A memo renders an input with its long texts cut; every cut a state shows is the same, and
    the encoders made once print what the standard ones print."""
    memo = RenderMemo()
    try:
        expected = truncate(js_json(value), limit)
    except (TypeError, ValueError):
        expected = "[unserializable input]"
    assert input_json(value, limit, memo) == expected
    for encoder, encode in ((_JS_ENCODER, _js_encode), (_PLAIN_ENCODER, _plain_encode)):
        try:
            standard = encoder.encode(value)
        except ValueError:
            with pytest.raises(ValueError):
                encode(value)
        else:
            assert encode(value) == standard



_SPACED = st.lists(st.sampled_from(list(" \t\n\x0b\x1c\x85\xa0\u2028\u3000\u200bab\u00e9\ud800")), max_size=20).map("".join)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(_SPACED, _TEXT, st.text()))
def test_text_checks_in_c_match_the_regexes(text: str) -> None:
    """Whitespace collapsed by split and join, and lone surrogates found by the UTF-8 encoder,
    as the regexes they replace find them."""
    assert collapse_spaces(text) == re.sub(r"\s+", " ", text)
    assert has_lone_surrogate(text) == (re.search("[\ud800-\udfff]", text) is not None)


# -- fitting -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_session() -> list:  # type: ignore[type-arg]
    return parse_transcript(list(transcript_lines(700)))


@pytest.mark.parametrize("keep", [0, 10])
def test_floor_is_under_every_stage_before_the_merge(long_session, keep: int) -> None:  # type: ignore[no-untyped-def]
    """The bound that lets fit_state skip the stages is below every state they can reach."""
    messages = long_session
    pairing = pair_tool_calls(messages, keep)
    goal = goal_from_messages(messages)
    memo = RenderMemo()
    smallest = history_entries(messages, pairing, INPUT_STAGES[-1][0], memo)
    pinned = [is_pinned(entry["i"], len(messages), keep) for entry in smallest]
    floor = _floor_tokens(goal, smallest, pinned, messages, pairing, float("inf"), memo)
    for input_chars, _ in INPUT_STAGES:
        assert floor <= _Budget(goal, history_entries(messages, pairing, input_chars, memo), 0).tokens
    # every step of the walk, stage by stage, down to the last one before the merge
    from fast_jev_compaction.state.fitting import _shrink

    order = [p for p in range(len(smallest)) if not pinned[p]] + [p for p in range(len(smallest)) if pinned[p]]
    left_out: set[int] = set()
    budget = _Budget(goal, smallest, 0)
    lowest = budget.tokens
    for _, position in _shrink(messages, pairing, smallest, pinned, order, left_out, memo):
        budget.update(position, None if position in left_out else smallest[position])
        lowest = min(lowest, budget.tokens)
    assert floor <= lowest
    assert lowest - floor < lowest * 0.1  # and close enough to be of use


def _reference_fit(messages, pairing, goal, keep, limit):  # type: ignore[no-untyped-def]
    """The stages walked one by one, every entry estimated whole (the plain form of fit_state)."""
    for input_chars, stage in INPUT_STAGES:
        entries = history_entries(messages, pairing, input_chars)
        tokens = _Budget(goal, entries, limit).tokens
        if tokens <= limit:
            return stage, tokens
    return None


@pytest.mark.parametrize("limit", [60_000, 30_000, 22_000, 12_000, 4_000])
def test_fit_state_agrees_with_the_plain_walk(long_session, limit: int) -> None:  # type: ignore[no-untyped-def]
    messages = long_session
    pairing = pair_tool_calls(messages, 10)
    goal = goal_from_messages(messages)
    try:
        fitted = fit_state(messages, pairing, goal, 10, limit)
    except FittingError:
        fitted = None
    reference = _reference_fit(messages, pairing, goal, 10, limit)
    if reference is not None:
        assert fitted is not None and (fitted.stage, fitted.tokens) == reference
    elif fitted is not None:
        # Fitted past the input stages: the state's own entries cost what the fit says.
        history = fitted.state["history"]
        assert fitted.tokens == _Budget(goal, history, limit).tokens == _Budget(goal, history, limit).base + sum(
            entry_tokens(entry) for entry in history
        )


@pytest.mark.parametrize("limit", [60_000, 24_500, 23_500, 22_000, 12_000, 4_000])
def test_fit_detailed_agrees_with_the_plain_walk_of_its_stages(long_session, limit: int) -> None:  # type: ignore[no-untyped-def]
    """The floors summed largest first and the entries with more calls first: the same state
    as the detailed stages walked whole, or none (and none when the size guess rules the
    history out)."""
    messages = long_session[:300]
    pairing = pair_tool_calls(messages, 10)
    _assert_fit_detailed_is_the_plain_walk(messages, pairing, goal_from_messages(messages), limit)


@pytest.mark.parametrize("likely_fit", [0, 3])
@pytest.mark.parametrize("limit", [60_000, 23_500, 12_000])
def test_fit_detailed_with_and_without_its_floors(long_session, limit: int, likely_fit: float, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The floors (every one of them, or none where the size guess says the history most likely
    fits) change only the work: the same state, or none."""
    from fast_jev_compaction.state import fitting

    monkeypatch.setattr(fitting, "LIKELY_FIT_CHARS_PER_TOKEN", likely_fit)
    messages = long_session[:300]
    _assert_fit_detailed_is_the_plain_walk(messages, pair_tool_calls(messages, 10), goal_from_messages(messages), limit)


def _assert_fit_detailed_is_the_plain_walk(messages: list, pairing, goal: str, limit: int) -> None:  # type: ignore[no-untyped-def, type-arg]
    from fast_jev_compaction.state.fitting import GUESSED_CHARS_PER_TOKEN, _size_guess, fit_detailed
    from fast_jev_compaction.state.history import shown_messages

    fitted = fit_detailed(messages, pairing, goal, limit, RenderMemo())
    reference = None
    guessed = sum(map(_size_guess, shown_messages(messages, pairing, RenderMemo())))
    for input_chars, stage in DETAILED_STAGES if guessed <= GUESSED_CHARS_PER_TOKEN * limit else ():
        entries = history_entries(messages, pairing, input_chars)
        tokens = _Budget(goal, entries, limit).tokens
        if tokens <= limit:
            reference = (stage, tokens, entries)
            break
    if reference is None:
        assert fitted is None
    else:
        assert fitted is not None and (fitted.stage, fitted.tokens, fitted.state["history"]) == reference


_ANY_TEXT = st.one_of(_TEXT, st.text())


def _session_of(turns: list[tuple[str, str, str]], last_waiting: bool = False) -> list:  # type: ignore[type-arg]
    """A transcript of one assistant turn per (text, command, output), each with its result (the
    last one's left out, its call pending, with ``last_waiting``)."""
    from fast_jev_compaction.evaluation.synthetic import _Chain

    chain = _Chain("u", "floors")
    lines = [chain.record("user", {"role": "user", "content": "Please look."})]
    for n, (text, command, output) in enumerate(turns):
        content = [{"type": "text", "text": text}, {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": command}}]
        lines.append(chain.record("assistant", {"role": "assistant", "id": f"msg_{n}", "content": content}))
        if last_waiting and n == len(turns) - 1:
            break
        result = [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}]
        lines.append(chain.record("user", {"role": "user", "content": result}))
    return parse_transcript(lines)


def _assert_floors_under_detailed_entries(messages: list) -> None:  # type: ignore[type-arg]
    from fast_jev_compaction.state.fitting import _frame_tenths, _uncut
    from fast_jev_compaction.state.history import history_entry, result_note, shown_messages

    pairing = pair_tool_calls(messages, 2)
    memo = RenderMemo()
    outputs = memo.outputs(messages)
    cut = DETAILED_STAGES[-1][0]
    for index, message, calls, waiting in shown_messages(messages, pairing, memo):
        tenths = _frame_tenths(index, message, calls, waiting, outputs, memo) + memo.tally(message.text)[0]
        # Added up from its parts: the tally of the floor's entry written whole.
        frame: dict[str, object] = {"i": index, "role": message.role, "text": message.text}
        if calls:
            frame["tool_calls"] = [
                {"id": c.id, "tool": c.tool, "input": _uncut(input_json(c.input, cut)), "result": result_note(c)}
                | ({"digest": ""} if outputs.get(c.tool_use_id) else {})
                for c in calls
            ]
        if waiting:
            frame["pending_calls"] = [
                {"tool_use_id": c.tool_use_id, "tool": c.tool, "input": _uncut(input_json(c.input, cut))} for c in waiting
            ]
        assert tenths == tally(plain_json(frame))[0]
        for input_chars, _ in DETAILED_STAGES:
            entry = history_entry(index, message, calls, waiting, input_chars, outputs, memo)
            assert -(-tenths // 10) + 1 <= estimate_tokens(plain_json(entry)) + 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_ANY_TEXT, st.one_of(_ANY_TEXT, st.text(min_size=150, max_size=1200)), _ANY_TEXT), min_size=1, max_size=4),
    st.booleans(),
)
def test_each_floor_is_under_its_entry_at_every_detailed_stage(turns: list[tuple[str, str, str]], last_waiting: bool) -> None:
    """fit_detailed's floor of an entry (an empty digest for each call with an output, inputs cut
    short without their cut mark) is under the entry at each stage it walks, and is the tally of
    that entry written whole: blank and empty outputs, inputs around the cuts, escapes, astral
    characters and pending calls included."""
    _assert_floors_under_detailed_entries(_session_of(turns, last_waiting))


@pytest.mark.parametrize("seed", [1, 7, 23])
def test_each_floor_is_under_its_entry_in_a_long_session(seed: int) -> None:
    _assert_floors_under_detailed_entries(parse_transcript(list(transcript_lines(300, seed))))


def test_detailed_stages_come_first() -> None:
    """fit_state takes fit_detailed's state as the first stage that fits: the stages it walks
    must open the list."""
    assert DETAILED_STAGES and INPUT_STAGES[: len(DETAILED_STAGES)] == DETAILED_STAGES


@settings(max_examples=400, deadline=None)
@given(_ANY_TEXT, st.integers(min_value=0, max_value=60), _ANY_TEXT, st.lists(_ANY_TEXT, max_size=4), st.integers(0, 10**6))
def test_entry_costs_from_parts_equal_the_whole_entry_estimate(
    text: str, repeat: int, call_input: str, one_liners: list[str], index: int
) -> None:
    """entry_tokens with a memo adds up its parts' tallies; it gives the whole entry's estimate."""
    long_text = text * repeat
    call = {"id": "t1", "tool": "Read", "input": call_input, "result": "ok, 12 chars (omitted)", "digest": text}
    pending = {"tool_use_id": "toolu_1", "tool": "Bash", "input": call_input}
    memo = RenderMemo()
    for entry in (
        {"i": index, "role": "assistant", "text": long_text, "tool_calls": [call, *one_liners]},
        {"i": index, "role": "user", "text": long_text},
        {"i": index, "role": "assistant", "text": "", "tool_calls": [], "pending_calls": [pending]},
        {"i": index, "role": "assistant", "text": text, "tool_calls": one_liners},
    ):
        whole = estimate_tokens(plain_json(entry)) + 1
        assert entry_tokens(entry, memo) == whole == _accumulated(plain_json(entry)) + 1
        assert entry_tokens(entry, memo) == whole  # and again, from what the memo kept
    # A rendered call on its own (a window's cost of it) from the memo's tally of it.
    assert item_tokens(call, memo) == estimate_tokens(plain_json(call)) + 1 == entry_tokens(call)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_ANY_TEXT, st.one_of(_ANY_TEXT, st.text(min_size=150, max_size=1200)), _ANY_TEXT), min_size=1, max_size=5),
    st.integers(min_value=40, max_value=3000),
)
def test_fit_detailed_agrees_with_the_plain_walk_on_small_sessions(turns: list[tuple[str, str, str]], limit: int) -> None:
    """The floors, the size guess and the walk's order on small sessions and any limit: the
    same state, or none, as the stages walked whole."""
    messages = _session_of(turns)
    _assert_fit_detailed_is_the_plain_walk(messages, pair_tool_calls(messages, 2), "fix the floors", limit)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.sampled_from(["", " ", "\n\t ", "\u3000", "x", " ok "]),
                          st.sampled_from(["none", "done", "waiting"])), min_size=1, max_size=12))
def test_size_guess_summed_without_listing_the_shown_messages(turns: list[tuple[str, str, str]]) -> None:
    """fit_detailed's guess of a history's size, summed from all texts and calls at once, is
    _size_guess summed over the shown messages: blank texts with and without calls, calls done
    and waiting."""
    from fast_jev_compaction.evaluation.synthetic import _Chain
    from fast_jev_compaction.state.fitting import _guessed_chars, _size_guess
    from fast_jev_compaction.state.history import shown_messages

    chain = _Chain("u", "guess")
    lines = []
    for n, (role, text, call) in enumerate(turns):
        if role == "user" or call == "none":
            lines.append(chain.record(role, {"role": role, "content": [{"type": "text", "text": text}]}))
            continue
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": "ls"}}
        lines.append(chain.record("assistant", {"role": "assistant", "id": f"msg_{n}", "content": [{"type": "text", "text": text}, use]}))
        if call == "done":
            result = [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "a b"}]
            lines.append(chain.record("user", {"role": "user", "content": result}))
    messages = parse_transcript(lines)
    pairing = pair_tool_calls(messages, 2)
    memo = RenderMemo()
    assert _guessed_chars(messages, pairing, memo) == sum(map(_size_guess, shown_messages(messages, pairing, memo)))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["command", "file_path", "content", "limit"]), st.one_of(_ANY_TEXT, st.integers())),
       st.integers(min_value=0, max_value=5000), st.sampled_from([" ", "\n", "x", " \t\n"]))
def test_one_line_input_reads_only_the_opening_of_long_texts(value: dict, repeat: int, filler: str) -> None:  # type: ignore[type-arg]
    """The one-liner of an input with long texts is the whole pairs' line collapsed and cut."""
    from fast_jev_compaction.state.history import one_line_input
    from fast_jev_compaction.textutil import js_json, truncate

    value = {k: v * repeat if isinstance(v, str) and k == "content" else v for k, v in value.items()}
    value["content"] = filler * repeat + str(value.get("content", ""))
    whole = " ".join(f"{k}={v}" if isinstance(v, str) else f"{k}={truncate(js_json(v), 200)}" for k, v in value.items())
    assert one_line_input(value) == truncate(re.sub(r"\s+", " ", whole), 60)


_TERM_ALPHABET = st.sampled_from(
    list("aZ_9.-/ é\u0130x\n:\u2192\ud800")
    + ["abcdef", "parse_header", "src/a.py", "v2.0", "__init__", "x.y.z-", "ab12cd", "日本語", "    12\u2192", "ReadFile"]
    # digits-only runs, runs of lead and trail characters, runs of exactly 6 and 7 bytes
    + ["1234567", "12.34/5-6", "./-./-.", "-..//--", "abcdefg", "Abcdef", "a\u00e9bcde", "9abcdef.", "\u2192", "a\u2192b"]
)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.lists(_TERM_ALPHABET, max_size=60).map("".join), _ANY_TEXT))
def test_term_pattern_finds_what_the_plain_pattern_finds(text: str) -> None:
    from fast_jev_compaction.state.history import _TERM

    assert _TERM.findall(text) == re.findall(r"[A-Za-z_][\w.\-/]{5,}[\w]", text)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.lists(_TERM_ALPHABET, max_size=60).map("".join), _ANY_TEXT))
@example("    12\u2192readFile\n    13\u2192x\u2192parse_header 12345678 ./src/a.py. abcdef abcdefg \u00e9t\u00e9_abcd")
@example("1234567 -..//-- 9abcdef. ab.cd.e/ Abcdefg")
@example("abcdefg 9abcdefg Abcdefg. Abcdefg a_bcdefg")
def test_term_counts_count_what_the_plain_pattern_finds(text: str) -> None:
    """The runs cut in C count each term as the regex over the whole text finds it, and the
    test of a term's bytes is the test of the term."""
    expected = Counter(re.findall(r"[A-Za-z_][\w.\-/]{5,}[\w]", text))
    counts = _term_counts(text)
    long = {word.decode("utf-8", "surrogatepass"): times for word, times in counts.items() if len(word) >= 7}
    # Every term is counted as often as the pattern finds it; only plain words (no terms) that
    # are runs of their own are left out, so a plain word may be counted less often or not at all.
    assert {word: times for word, times in long.items() if _is_term(word)} == {
        word: times for word, times in expected.items() if _is_term(word)
    }
    assert set(long) <= set(expected)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.lists(_TERM_ALPHABET, max_size=80).map("".join), _ANY_TEXT), st.integers(1, 3))
@example(" " * (TERM_SCAN_CHARS - 10) + "parse_header src/a.py " * 2, 1)  # terms cut at the scan's end
@example("    12\u2192Read_it 8\u2192src/b.py\n", 3)
def test_digest_terms_are_the_plain_definition(text: str, times: int) -> None:
    """A digest's terms: the ``_TERM`` matches of the opening ``TERM_SCAN_CHARS`` characters, redacted,
    counted, the 8 most repeated that pass ``_is_term``, ties alphabetical."""
    from fast_jev_compaction.redaction import redact_text
    from fast_jev_compaction.state.history import _parts

    text = text * times
    counts = Counter(re.findall(r"[A-Za-z_][\w.\-/]{5,}[\w]", redact_text(text[:TERM_SCAN_CHARS])))
    expected = sorted((term for term in counts if _is_term(term)), key=lambda term: (-counts[term], term))[:8]
    assert _parts(text)[2] == " ".join(expected)


_LINE_PIECES = st.sampled_from(
    ["", "  x", "\r", "a line", "日本", "    12\u2192code", "a" * 45, "b " * 400, " " * 40, "c\x0cd\u2028", "e" * 700]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=30), st.integers(1, 60), st.sampled_from([0, 100, 300, 301, 1000, 5000]))
def test_digest_ends_are_the_ends_of_the_whole_flattened_output(lines: list[str], times: int, budget: int) -> None:
    """A digest read from each end's flattened characters is the digest of the whole output's
    flattened lines."""
    from fast_jev_compaction.state.history import _parts, output_digest

    text = "\n".join(lines * times)
    flat = " ⏎ ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(flat) > budget:
        head = budget * 3 // 5
        flat = f"{flat[:head]} … {flat[len(flat) - (budget - head):]}"
    terms = _parts(text)[2]
    assert output_digest(text, budget) == (f"{flat} [terms: {terms}]" if terms else flat)
    assert output_digest(text, budget, RenderMemo()) == output_digest(text, budget)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.from_regex(r"t[0-9]{1,6}", fullmatch=True), _ANY_TEXT), _ANY_TEXT, st.integers(0, 10**9))
def test_question_tokens_equal_the_estimate_of_the_questions(call_id: str, tool: str, chars: int) -> None:
    from fast_jev_compaction.conversation.pairing import ToolCall
    from fast_jev_compaction.state.questions import question_tokens, questions_for
    from fast_jev_compaction.textutil import js_json

    call = ToolCall(call_id, "toolu_1", tool, {}, 1, 2, chars, False, False)
    assert question_tokens(call) == estimate_tokens(js_json(questions_for(call)))


# -- lexicon: side effects -----------------------------------------------------------------------

_COMMAND_WORDS = st.sampled_from(
    "git -C /x push status npm pnpm install i uv pip3 go get rm -rf mv cp tee sed -i -n curl -X POST "
    "--data -d wget --post deploy kubectl helm apply terraform docker compose up gh pr create "
    "systemctl service restart psql mysql insert migrate alembic upgrade ssh scp rsync > >> 2>&1 "
    "/dev/null out.txt ; && | ( ) = echo ls make pytest a b".split()
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_COMMAND_WORDS, max_size=12), st.sampled_from([" ", "", "\n", "\t"]))
def test_side_effect_patterns_one_by_one_match_as_their_alternation(words: list[str], joint: str) -> None:
    from fast_jev_compaction.conversation.lexicon import _SIDE_EFFECT, _SIDE_EFFECT_PATTERNS, SIDE_EFFECT, shell_kind

    alternation = re.compile("|".join(f"(?:{pattern})" for pattern, _ in _SIDE_EFFECT_PATTERNS))
    command = joint.join(words).lower()
    # the patterns search the command with a blank in front (standing for its start)
    assert (shell_kind(command) == SIDE_EFFECT) == bool(alternation.search(" " + command))
    assert (shell_kind(command) == SIDE_EFFECT) == bool(_PLAIN_SIDE_EFFECT.search(command))
    # the words are what the patterns need: each pattern matching holds one of its words
    for pattern, needed in _SIDE_EFFECT:
        if pattern.search(" " + command):
            assert any(word in command for word in needed)


# The plain form of the side-effect patterns: searched in the command itself, those that may
# match at its start say so with a ``^`` branch.
_PLAIN_SIDE_EFFECT = re.compile(
    r"\bgit\s+(?:-[a-z]\s+\S+\s+)*(?:commit|push|merge|rebase|reset|revert|cherry-pick|tag|am|apply|"
    r"stash|checkout|switch|rm|mv|clean|pull|fetch|clone|init|restore|add|submodule|worktree)\b"
    r"|\b(?:npm|pnpm|yarn|bun|pip3?|uv|poetry|cargo|gem|brew|apt-get|apt|yum|dnf|apk|conda|composer|go)\b"
    r"[^|;&\n]*?\b(?:install|add|remove|uninstall|publish|upgrade|i|ci|get)\b"
    r"|(?:^|[\s;&|(])(?:rm|rmdir|mv|cp|mkdir|touch|chmod|chown|ln|kill|pkill|killall|dd|truncate|"
    r"shred|tee|unlink|install)\s"
    r"|\bsed\s+(?:-[a-z]*i|--in-place)"
    r"|\bcurl\b.*(?:-x\s*(?:post|put|patch|delete)|--request\s*=?\s*(?:post|put|patch|delete)|\s-d\s|"
    r"--data|\s-f\s|--form|--upload-file)"
    r"|\bwget\b.*--post"
    r"|\b(?:deploy|publish)\b"
    r"|\b(?:kubectl|helm)\s+(?:apply|delete|create|install|upgrade|uninstall|rollout|scale|patch|replace)\b"
    r"|\bterraform\s+(?:apply|destroy|import)\b"
    r"|\bdocker(?:\s+compose|-compose)?\s+(?:push|run|rm|rmi|build|up|down|stop|kill|exec|tag)\b"
    r"|\bgh\s+(?:pr|issue|release|repo|workflow|run)\s+(?:create|merge|close|comment|edit|delete|"
    r"run|review|rerun|cancel)\b"
    r"|\b(?:systemctl|service)\b.*\b(?:start|stop|restart|enable|disable|reload)\b"
    r"|\b(?:psql|mysql|sqlite3)\b.*\b(?:insert|update|delete|drop|create|alter)\b"
    r"|\b(?:migrate|alembic\s+upgrade)\b"
    r"|\b(?:ssh|scp|rsync)\s"
    r"|(?:^|[^0-9&>\-=])>>?\s*(?!&|/dev/null)[^\s&|;>]"
)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("rmvcpteinsal>&|;( -=0\n\t")), max_size=24))
@example("rm x")
@example(">out")
@example("tee")
@example("2>x")
def test_side_effect_patterns_with_a_blank_in_front_match_the_plain_form(command: str) -> None:
    from fast_jev_compaction.conversation.lexicon import SIDE_EFFECT, shell_kind

    assert (shell_kind(command) == SIDE_EFFECT) == bool(_PLAIN_SIDE_EFFECT.search(command.lower()))


# -- judge: who names a file last ----------------------------------------------------------------

_NAMING_TEXTS = st.lists(st.lists(st.sampled_from(["app.py", "App.PY", "x", "\x00", "main.rs", "apple", " ", "py"]), max_size=6).map("".join), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_NAMING_TEXTS, st.sampled_from([1, 7, 1 << 16]))
def test_last_naming_finds_what_a_walk_text_by_text_finds(texts: list[str], chunk: int) -> None:
    from fast_jev_compaction.judge import features

    names = {"app.py", "main.rs", "apple", "none.txt"}
    expected: dict[str, int] = {}
    for position, text in enumerate(texts):  # walked in this order, the first holder wins
        for name in names:
            if name in text.lower() and name not in expected:
                expected[name] = position
    previous, features._NAMING_CHUNK_CHARS = features._NAMING_CHUNK_CHARS, chunk
    try:
        assert features._last_naming(enumerate(texts), names) == expected
    finally:
        features._NAMING_CHUNK_CHARS = previous


# -- textutil: an ASCII text without a NUL is left alone without a search -----------------------

_UNWRITABLE_PLAIN = re.compile("[\ud800-\udfff\x00]")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", " ", "\x00", "\ud83d", "\ude80", "é", "🚀", "\\"]), max_size=12))
def test_escape_unwritable_escapes_what_the_pattern_finds(text: str) -> None:
    from fast_jev_compaction.textutil import escape_unwritable

    expected = _UNWRITABLE_PLAIN.sub(lambda m: "\\x00" if m.group() == "\x00" else f"\\u{ord(m.group()):04x}", text)
    assert escape_unwritable(text) == expected


# -- outside the plan: goal, pairing ------------------------------------------------------------

_PROMPTS = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant"]),
        st.sampled_from(["", "  ", "fix the parser", "<system-reminder>x</system-reminder>", "Caveat: no", "a" * 600, "ok"]),
        st.booleans(),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(_PROMPTS)
def test_goal_walked_from_the_end_is_the_last_prompts_of_all(rows: list[tuple[str, str, bool]]) -> None:
    from fast_jev_compaction.conversation.messages import ToolResult
    from fast_jev_compaction.state.goal import GOAL_PROMPT_CHARS, GOAL_PROMPTS, prompt_text

    messages = [
        SessionMessage(role=role, text=text, toolResults=(ToolResult(tool_use_id="x", text="out"),) if result else None)  # type: ignore[arg-type]
        for role, text, result in rows
    ]
    prompts = [text for text in map(prompt_text, messages) if text]
    expected = "\n".join(truncate(text, GOAL_PROMPT_CHARS) for text in prompts[-GOAL_PROMPTS:])
    assert goal_from_messages(messages) == expected


@pytest.mark.parametrize("keep", [-1, 0, 1, 6, 10, 400])
def test_pinned_calls_are_those_with_a_pinned_end_and_results_all_results(keep: int) -> None:
    messages = parse_transcript(list(transcript_lines(300, seed=3)))
    pairing = pair_tool_calls(messages, keep)
    total = len(messages)
    assert [call.pinned for call in pairing.calls] == [
        is_pinned(call.call_index, total, keep) or is_pinned(call.result_index, total, keep) for call in pairing.calls
    ]
    assert pairing.results == {r.tool_use_id: r for m in messages for r in m.toolResults or ()}


# -- lexicon: shells and inputs ------------------------------------------------------------------


def _plain_program_words(segment: str) -> list[str]:
    from fast_jev_compaction.conversation.lexicon import _ENV_ASSIGN, _PYTHON, _WRAPPERS

    words = segment.split()
    while words and (_ENV_ASSIGN.match(words[0]) or words[0] in _WRAPPERS):
        words.pop(0)
    if len(words) >= 2 and words[0] == "timeout":
        words = words[2:]
    if len(words) >= 3 and words[0] in ("uv", "poetry", "pdm", "pipenv") and words[1] == "run":
        words = words[2:]
    if len(words) >= 3 and _PYTHON.fullmatch(words[0]) and words[1] == "-m":
        words = words[2:]
    return words


_SHELL_WORDS = st.sampled_from(
    "A=1 a_b=x =x 1=2 sudo time nohup timeout 5 uv poetry run python python3 python3.11 python3x pythonic -m "
    "pytest git status log push ls cat cd dir echo rm npm test && || ; | \u0130 \u00e9=1 x".split()
)


# The plain form of a command's segments: the separators with the blanks beside them.
_COMMAND_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


@settings(max_examples=500, deadline=None)
@given(st.lists(_SHELL_WORDS, max_size=10), st.sampled_from([" ", "  ", "\t", " ; ", " && "]))
def test_shell_words_and_kind_match_the_plain_forms(words: list[str], joint: str) -> None:
    from fast_jev_compaction.conversation import lexicon

    command = joint.join(words)
    assert lexicon.program_words(command) == _plain_program_words(command)
    lowered = command.lower()
    segments = [s for s in _COMMAND_SPLIT.split(lowered) if s.strip()]
    inspects = bool(segments) and all(lexicon._is_inspect(s) for s in segments)
    kind = lexicon.shell_kind(command)
    if kind in (lexicon.INSPECT, lexicon.SHELL):
        assert kind == (lexicon.INSPECT if inspects else lexicon.SHELL)


# The plain form of the test/build pattern: a word boundary on each side of every branch.
_PLAIN_TEST_BUILD = re.compile(
    r"\b(?:pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|tsc|mypy|pyright|ruff|"
    r"flake8|pylint|eslint|clippy|unittest)\b"
    r"|\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|check|typecheck|compile)\b"
    r"|\bcargo\s+(?:test|build|check|clippy|run|bench)\b"
    r"|\bgo\s+(?:test|build|vet|run)\b"
    r"|\b(?:make|cmake|ninja|gradle|gradlew|mvn|bazel)\b"
    r"|\bdotnet\s+(?:build|test)\b"
)
_BUILD_WORDS = st.sampled_from(
    "pytest py.test py_test tox toxic jest mypy ruff npm pnpm yarn bun run test build lint testing cargo bench "
    "go vet make cmake makefile gradle gradlew mvn dotnet x - _ . / = ls git push rm cd".split()
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_BUILD_WORDS, max_size=8), st.sampled_from([" ", "", "  ", "\t", "/", "-", "_", ";"]))
def test_test_build_pattern_matches_as_its_plain_form(words: list[str], joint: str) -> None:
    from fast_jev_compaction.conversation.lexicon import _TEST_BUILD

    command = joint.join(words)
    assert bool(_TEST_BUILD.search(command)) == bool(_PLAIN_TEST_BUILD.search(command))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_BUILD_WORDS, _SHELL_WORDS, _COMMAND_WORDS), max_size=10), st.sampled_from([" ", " && ", " | ", "\n"]),
       st.sampled_from(["Bash", "shell", "exec_command"]), st.sampled_from(["command", "cmd"]))
def test_a_shell_shape_has_the_tool_kind_with_inspecting_as_shell(words: list[str], joint: str, tool: str, key: str) -> None:
    from fast_jev_compaction.conversation.lexicon import INSPECT, SHELL, call_shape, tool_kind

    fields = {key: joint.join(words)}
    kind = tool_kind(tool, fields)
    assert call_shape(tool, fields).kind == (SHELL if kind == INSPECT else kind)


def _plain_clip(text: str, limit: int) -> str:
    spaces = re.compile(r"\s+")
    if len(text) > 4 * limit:
        head = spaces.sub(" ", text[: 4 * limit]).lstrip()
        if len(head) > limit and head[limit:].strip():
            return head[: limit - 1] + "…"
    text = spaces.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(["a", "bc", " ", "  ", "\t", "\n", "\x1c", "\x85", "\u3000", "\xa0", "é"]), max_size=40).map("".join),
       st.integers(min_value=1, max_value=8))
@example("a " * 20, 5)
@example(" " * 30 + "abc", 5)
@example("abcdef " + " " * 20, 5)
def test_clip_folds_blanks_as_the_pattern_does(text: str, limit: int) -> None:
    from fast_jev_compaction.conversation.lexicon import _clip

    assert _clip(text, limit) == _plain_clip(text, limit)


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_JSONISH)
def test_as_text_renders_as_json_dumps(value: object) -> None:
    import json

    from fast_jev_compaction.conversation.lexicon import as_text

    expected = value if isinstance(value, str) else "" if value is None else json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )
    assert as_text(value) == expected


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\t", "\n", "\x1c", "\u3000", "&", "|", ";", "&&", "||", "Σ"]), max_size=16).map("".join))
def test_command_segments_split_as_the_pattern(command: str) -> None:
    from fast_jev_compaction.conversation.lexicon import command_segments

    assert command_segments(command) == _COMMAND_SPLIT.split(command)


# -- rules: a failed call's program ---------------------------------------------------------------

_RUN_COMMANDS = st.sampled_from(
    ["pytest", "pytest > out.txt", "cd src && pytest -x", "make", "make > log", "ls", "grep x | pytest", "rm -rf build",
     "npm test", "npm test && git push", "echo hi"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_RUN_COMMANDS, st.booleans()), max_size=8))
def test_failed_calls_are_fixed_as_when_every_shape_held_its_program(runs: list[tuple[str, bool]]) -> None:
    from fast_jev_compaction.conversation.lexicon import TEST_BUILD, command_head
    from fast_jev_compaction.conversation.pairing import ToolCall
    from fast_jev_compaction.decide.rules import call_facts

    calls = [
        ToolCall(f"t{i}", f"u{i}", "Bash", {"command": command}, 2 * i, 2 * i + 1, 3, failed, False)
        for i, (command, failed) in enumerate(runs)
    ]
    facts = call_facts(calls)
    # the plain form: every shell shape holds its program, and a later successful test/build run
    # of the same program (or the same command) fixes a failure
    heads = [command_head(" ".join(fact.shape.command.split())) for fact in facts]
    for i, fact in enumerate(facts):
        assert fact.shape.head == (heads[i] if fact.shape.kind == TEST_BUILD else "")
        if fact.call.is_error:
            later = [(facts[j], heads[j]) for j in range(i + 1, len(facts)) if not facts[j].call.is_error]
            expected = any(other.shape.rerun_key == fact.shape.rerun_key for other, _ in later) or any(
                other.shape.kind == TEST_BUILD and head == heads[i] and head for other, head in later
            )
            assert fact.fixed_later == expected


# -- windows -------------------------------------------------------------------------------------


_INPUTS = st.dictionaries(st.sampled_from(["command", "file_path", "content", "limit", "x"]),
                          st.one_of(_TEXT, st.integers(), st.lists(_TEXT, max_size=3)), max_size=4)


@settings(max_examples=300, deadline=None)
@given(_TEXT, _TEXT, _INPUTS, st.integers(min_value=0, max_value=10**9), st.booleans())
def test_a_line_is_never_longer_than_its_bound(call_id: str, tool: str, value: dict, size: int, error: bool) -> None:  # type: ignore[type-arg]
    from fast_jev_compaction.conversation.pairing import ToolCall
    from fast_jev_compaction.state.history import one_line_call, one_line_most_chars

    call = ToolCall(call_id, "u", tool, value, 0, 1, size, error, False)
    assert len(one_line_call(call)) <= one_line_most_chars(call)


def _plain_surround(windows, entries, tokens, limit, first, last):  # type: ignore[no-untyped-def]
    """_surround over the list of every message that shows, as it was first written."""
    from bisect import bisect_left

    from fast_jev_compaction.state.windows import MAX_MISSES

    messages = windows.messages
    shown = [i for i, m in enumerate(messages) if m.text.strip() or i in windows.completed or i in windows.pending]
    misses = 0
    left, right = bisect_left(shown, first) - 1, bisect_left(shown, last) + 1
    while left >= 0 or right < len(shown):
        grew = False
        for side in (1, 0):
            if side == 0 and left >= 0:
                index, left = shown[left], left - 1
            elif side == 1 and right < len(shown):
                index, right = shown[right], right + 1
            else:
                continue
            if index in entries:
                grew = True
                continue
            entry, cost = windows._context(index)
            if tokens + cost <= limit:
                entries[index] = entry
                tokens += cost
                grew = True
            else:
                misses += 1
        if not grew or misses > MAX_MISSES:
            break
    return tokens, shown


@pytest.mark.parametrize("keep", [0, 6, 40])
def test_windows_walk_out_as_over_the_list_of_shown_messages(long_session, keep: int) -> None:  # type: ignore[no-untyped-def]
    from fast_jev_compaction.state.windows import _Windows

    # Cut after a message with calls: they wait for their outputs (pending work).
    messages = long_session[:max(i for i, m in enumerate(long_session[:-1]) if m.toolUses) + 1]
    pairing = pair_tool_calls(messages, keep)
    windows = _Windows(messages, pairing, goal_from_messages(messages), keep, 25_000, 30_000, {}, RenderMemo())
    calls = pairing.calls
    for start, length, room in [(0, 1, 400), (5, 3, 2_000), (len(calls) // 2, 4, 50), (len(calls) - 2, 2, 9_000),
                                (len(calls) // 3, 1, 100_000)]:
        window = calls[start:start + length]
        first, last = window[0].call_index, window[-1].call_index
        required = {i: windows.required_entries[i] for i in windows.required}
        entries, plain = dict(required), dict(required)
        tokens = windows._surround(entries, 1_000, 1_000 + room, first, last)
        plain_tokens, shown = _plain_surround(windows, plain, 1_000, 1_000 + room, first, last)
        assert (tokens, list(entries)) == (plain_tokens, list(plain))
    assert windows.required == [i for i in shown if is_pinned(i, len(messages), keep) or i in windows.pending]
    assert windows.pending


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_a_texts_estimate_from_the_tally_of_its_json_is_its_estimate(text: str) -> None:
    from fast_jev_compaction.state.windows import _text_tokens

    assert _text_tokens(text, RenderMemo()) == estimate_tokens(text)
    assert _text_tokens(text.replace('"', "").replace("\\", "").replace("\n", " "), RenderMemo()) == estimate_tokens(
        text.replace('"', "").replace("\\", "").replace("\n", " ")
    )


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT)
def test_the_state_base_from_tallies_is_the_whole_estimate(goal: str) -> None:
    """state_base_tokens adds the goal's tally to the fixed context's: the estimate of the
    whole empty-history state."""
    from fast_jev_compaction.state.fitting import build_state, state_base_tokens

    assert state_base_tokens.__wrapped__(goal) == estimate_tokens(js_json(build_state(goal, [])))
# Every class JSON escapes differently: as it is, in two characters, in six, a lone surrogate
# (js_json's own escape), and pieces long enough to cross stats._COUNTED_TEXT.
_JSON_TEXT_PIECES = st.sampled_from(
    ["a", " ", '"', "\\", "\x00", "\x1b", "\x1f", "\b", "\f", "\n", "\r", "\t", "\x7f", "\u00e9", "\u2028",
     "\ud800", "\U0001F680", "x" * 100, "é" * 90]
)
_JSON_TEXT = st.lists(_JSON_TEXT_PIECES, max_size=12).map("".join)
_INPUT_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_JSON_TEXT, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.dictionaries(_JSON_TEXT, _INPUT_VALUE, max_size=5), _INPUT_VALUE))
@example({"content": "x" * 300, "replace_all": True, "limit": 10**5000})  # an int JSON cannot write
@example({1: "a", "b": 2.0})
@example({"edits": [{"old_string": "\ud800" * 300}], "n": float("nan")})
def test_input_chars_is_the_length_of_the_rendered_input(value: object) -> None:
    from fast_jev_compaction.conversation.sizes import input_chars

    try:
        expected = len(js_json(value))
    except (TypeError, ValueError):
        expected = 20
    assert input_chars(value) == expected


def test_input_chars_of_inputs_json_cannot_write() -> None:
    from fast_jev_compaction.conversation.sizes import input_chars

    assert input_chars({"a": {1}}) == input_chars({1}) == input_chars({"a": "x" * 300, "b": [object()]}) == 20


@settings(max_examples=500, deadline=None)
@given(_INPUT_VALUE)
def test_as_text_prints_what_json_dumps_prints(value: object) -> None:
    import json

    from fast_jev_compaction.conversation.lexicon import as_text

    if isinstance(value, str) or value is None:
        return
    assert as_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)



@settings(max_examples=1000, deadline=None)
@given(_INPUT_VALUE | st.lists(st.sampled_from([1.0, 2.5, 1e16, 1e21, 3e22, -0.0, "e+", "v1.0", "+", 7]), max_size=4))
@example({"version": "1.0", "n": 1e+22})
@example(["1e+5", 1e16])
def test_js_json_rewrites_what_an_unfiltered_walk_rewrites(value: object) -> None:
    """js_json walks a value for integral floats only when its text holds ".0", or "+" and "e+"."""
    import json

    from fast_jev_compaction.textutil import _js_value

    try:
        plain = json.dumps(_js_value(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        with pytest.raises((TypeError, ValueError)):
            js_json(value)
        return
    assert js_json(value) == re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", plain)


_MARK_PIECES = ["[", "]", "[fast-jev-compaction", "[fast-jev-compaction ", "[fast-jev-compaction: ", "kept ", "moved ", "x", " ", "\n", "é"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_MARK_PIECES), max_size=8).map("".join))
@example("no bracket at all fast-jev-compaction kept ")
def test_carries_mark_is_the_pattern_search(text: str) -> None:
    """The "[" and prefix searches before the pattern rule out only texts it finds nothing in."""
    from fast_jev_compaction.decide.markers import _OWN_MARK, carries_mark

    assert carries_mark(text) == (_OWN_MARK.search(text) is not None)


# -- goal: the prompts the user typed ------------------------------------------------------------


# The plain form of the injected blocks: from an opening tag to the first closing tag of its name.
_INJECTED_BLOCK = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-[\w-]+|"
    r"task-notification|user-prompt-submit-hook|bash-input|bash-stdout|bash-stderr)>.*?</\1>",
    re.DOTALL,
)


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<system-reminder>", "</system-reminder>", "<bash-input>", "</bash-input>", "<local-command-stdout>",
             "</local-command-stdout>", "</local-command-x>", "<local-command-", "<bash-stdout>", "</bash-stdout",
             "x", " ", "\n", "<", ">", "</", "Caveat: "]
        ),
        max_size=12,
    ).map("".join)
)
@example("  <system-reminder>a</system-reminder> typed ")
@example("<bash-input><system-reminder>a</bash-input>b</system-reminder>c")
@example("<bash-input>a<bash-input>b</bash-input>c</bash-input>d")
def test_injected_blocks_go_as_the_lazy_pattern_takes_them(text: str) -> None:
    from fast_jev_compaction.state.goal import _INJECTED_OPENERS, prompt_text

    plain = _INJECTED_BLOCK.sub("", text).strip()
    if plain.startswith(_INJECTED_OPENERS):
        plain = ""
    assert prompt_text(SessionMessage(role="user", text=text)) == plain


def _plain_plan(messages: list, pairing, to_judge: list, goal: str, budgets: tuple[int, int], cost: dict[str, int]) -> list:  # type: ignore[no-untyped-def, type-arg]
    """plan_requests as it reads, the windows' cost compared for any number of batches (None
    where the newest messages overflow a window, a path this does not take)."""
    from fast_jev_compaction.state.fitting import fit_detailed
    from fast_jev_compaction.state.questions import REQUEST_OVERHEAD_TOKENS, batch_calls
    from fast_jev_compaction.state.windows import Request, _hopeless, _Windows

    max_state, max_request = budgets
    memo = RenderMemo()
    limit = min(max_state, max_request - REQUEST_OVERHEAD_TOKENS - max(cost[call.id] for call in to_judge))
    try:
        windows = _Windows(messages, pairing, goal, 2, max_state, max_request, cost, memo)
    except FittingError:
        return None  # type: ignore[return-value]
    limit = min(limit, windows.focus(to_judge))
    single = fit_detailed(messages, pairing, goal, limit, memo)
    if single is not None and not _hopeless(pairing, goal, limit, memo):
        batches = batch_calls(to_judge, single.tokens, max_request, cost)
        if len(batches) * single.tokens <= windows.cost(to_judge):
            return [Request(single.state, single.tokens, single.stage, batch) for batch in batches]
    return windows.requests(to_judge)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_ANY_TEXT, st.one_of(_ANY_TEXT, st.text(min_size=150, max_size=1200)), _ANY_TEXT), min_size=1, max_size=6),
    st.integers(min_value=200, max_value=6000),
    st.integers(min_value=300, max_value=9000),
    st.booleans(),
)
def test_plan_requests_takes_one_batch_of_a_fitting_state_without_costing_the_windows(
    turns: list[tuple[str, str, str]], max_state: int, max_request: int, down: bool
) -> None:
    """A single state that fits and goes in one request is the plan without the windows' cost
    compared, and one that does not fit under the most the windows' focus can be is ruled out
    without the exact focus: the same requests as the plan that compares them, whatever the
    budgets; also were every estimate the window calls leave open one less than its bound
    (``down``, as 3 in 40 are on the corpus)."""
    from contextlib import nullcontext
    from unittest import mock

    from fast_jev_compaction.state import windows as module
    from fast_jev_compaction.state.questions import question_tokens
    from fast_jev_compaction.state.windows import plan_requests

    lowered = mock.patch.object(module, "item_tokens", lambda item, memo: memo.tally(item)[0] // 10 + 1)

    messages = _session_of(turns)
    pairing = pair_tool_calls(messages, 2)
    to_judge = list(pairing.calls)
    cost = {call.id: question_tokens(call) for call in to_judge}
    goal = "fix the floors"

    def planned(plan: Callable[[], list | None]) -> object:  # type: ignore[type-arg]
        try:
            requests = plan()
        except FittingError:
            return "too large"
        return requests and [(r.state, r.state_tokens, r.stage, [c.id for c in r.calls]) for r in requests]

    with lowered if down else nullcontext():
        plain = planned(lambda: _plain_plan(messages, pairing, to_judge, goal, (max_state, max_request), cost))
        if plain is not None:
            assert planned(lambda: plan_requests(messages, pairing, to_judge, goal, 2, max_state, max_request, cost)) == plain


@pytest.mark.parametrize("down", [False, True])
def test_windows_split_from_cost_bounds_as_from_exact_costs(long_session, monkeypatch, down: bool) -> None:  # type: ignore[no-untyped-def]
    """A window call's cost is a bound until a decision needs it exact (windows._Windows._call_most):
    the split closes a window where the exact costs would, at every room, those just at a
    window's edge included; also were every open estimate one less than its bound (``down``:
    on the corpus 3 in 40 are)."""
    from fast_jev_compaction.state import windows as module
    from fast_jev_compaction.state.questions import question_tokens

    monkeypatch.setattr(module, "WINDOW_SHARE", 1.0)
    if down:
        monkeypatch.setattr(module, "item_tokens", lambda item, memo: memo.tally(item)[0] // 10 + 1)
    pairing = pair_tool_calls(long_session, 6)
    calls = list(pairing.calls)
    cost = {call.id: question_tokens(call) for call in calls}

    def windows() -> module._Windows:
        return module._Windows(long_session, pairing, "goal", 6, 10**9, 10**9, cost, RenderMemo())

    exact = windows()
    costs = [exact._call_cost(call) + cost[call.id] for call in calls]
    bounds = windows()
    most = [bounds._call_most(call) + cost[call.id] for call in calls]
    opened = [call.id in bounds._open for call in calls]
    assert sum(opened) >= 5  # the estimates left open, one in ten or so
    assert all(high - is_open <= call_cost <= high for high, is_open, call_cost in zip(most, opened, costs))

    def plain_split(room: float) -> list[list[str]]:
        split: list[list[str]] = [[]]
        used = 0.0
        for call, call_cost in zip(calls, costs):
            if split[-1] and used + call_cost > room:
                split.append([])
                used = 0.0
            split[-1].append(call.id)
            used += call_cost
        return split

    edges = [sum(costs[:end]) for end in range(1, 40)]
    for room in sorted({edge + step for edge in edges for step in (-1.5, -1, -0.5, 0, 0.5, 1)}):
        windows_at = windows()
        monkeypatch.setattr(windows_at, "_room", lambda room=room: room)
        assert [[call.id for call in window] for window in windows_at._split(calls)] == plain_split(room)


def test_plan_requests_tries_the_single_state_again_under_a_lesser_exact_focus(long_session, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The single state is tried first under the most the windows' focus can be; one that fits
    only there is not the plan when the exact focus is less (every open estimate one less here)."""
    from fast_jev_compaction.state import windows as module
    from fast_jev_compaction.state.fitting import FittedState, build_state
    from fast_jev_compaction.state.questions import question_tokens

    monkeypatch.setattr(module, "item_tokens", lambda item, memo: memo.tally(item)[0] // 10 + 1)
    pairing = pair_tool_calls(long_session, 6)
    to_judge = list(pairing.calls)
    cost = {call.id: question_tokens(call) for call in to_judge}
    windows = module._Windows(long_session, pairing, "goal", 6, 10**9, 10**9, cost, RenderMemo())
    most = windows.focus(to_judge, closed=False)
    assert windows.focus(to_judge) < most
    fitted = FittedState(build_state("goal", []), 10, "full")
    limits: list[float] = []

    def fits_at_most(messages, pairing, goal, limit, memo):  # type: ignore[no-untyped-def]
        limits.append(limit)
        return fitted if limit >= most else None

    monkeypatch.setattr(module, "fit_detailed", fits_at_most)
    monkeypatch.setattr(module, "_hopeless", lambda *args: False)
    requests = module.plan_requests(long_session, pairing, to_judge, "goal", 6, 10**9, 10**9, cost)
    assert limits == [most, windows.focus(to_judge)]
    assert {request.stage for request in requests} == {module.WINDOWED}
