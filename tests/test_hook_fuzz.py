"""Fuzz the real hook process with hostile events.

Whatever arrives on stdin (random bytes, other encodings, cut-off or deeply nested JSON, wrong
shapes, lone surrogates and NULs in texts, ids and paths, zero to many messages, huge texts),
``python -I hooks/fast_jev_hook.py`` exits 0, writes nothing to stderr, answers exactly one
protocol document, never replaces the conversation on malformed input, and never hangs.

The examples are derandomised and bounded so the suite runs in about a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from test_hook_entry import hook_env

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "fast_jev_hook.py"
# A guard against a hang, far above any honest run; never the thing a test measures.
HANG_GUARD_S = 90

# Every character, lone surrogates and NULs included.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
hostile_text = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    st.sampled_from(["", "..", "../../etc", "/", "\x00", "\ud800", "\udfff", "a\x00b", "🙂"[:1], "\u202e", " " * 3]),
)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), hostile_text)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=10,
)


@st.composite
def tool_pair(draw: st.DrawFn, index: int) -> list[dict[str, Any]]:
    tool_id = draw(st.one_of(st.just(f"toolu_{index}"), hostile_text))
    output = draw(hostile_text) * draw(st.integers(1, 200))
    return [
        {
            "role": "assistant",
            "text": draw(hostile_text),
            "toolUses": [{"tool_use_id": tool_id, "tool": draw(hostile_text), "input": draw(json_value), "text": output}],
            "handle": draw(st.one_of(st.none(), hostile_text)),
        },
        {
            "role": "user",
            "text": "",
            "toolUses": [],
            "toolResults": [{"tool_use_id": tool_id, "text": output, "isError": draw(st.booleans())}],
        },
    ]


@st.composite
def well_formed_event(draw: st.DrawFn, data: Path) -> dict[str, Any]:
    """A valid session.compact event with hostile content: any action is a fair answer."""
    messages: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            messages += draw(tool_pair(index))
        else:
            messages.append({"role": draw(st.sampled_from(["user", "assistant"])), "text": draw(hostile_text), "toolUses": []})
    return {
        "event": "session.compact",
        "trigger": draw(st.one_of(st.sampled_from(["manual", "auto", "precompute"]), hostile_text)),
        "instructions": draw(st.one_of(st.none(), hostile_text)),
        "agentId": draw(st.one_of(st.none(), hostile_text)),
        "sessionId": draw(st.one_of(st.none(), hostile_text)),
        "pluginData": draw(st.one_of(st.just(str(data)), hostile_text)),
        "cwd": draw(hostile_text),
        "options": draw(st.dictionaries(st.sampled_from(["keepThreshold", "timeoutSeconds", "judge", "minReductionRatio", "preserveRecentMessages", "maxStateTokens"]), json_value, max_size=3)),
        "messages": messages,
    }


def encode(doc: Any) -> bytes:
    # ensure_ascii escapes lone surrogates, which is how a JS host would send them.
    return json.dumps(doc, ensure_ascii=True, allow_nan=True).encode("ascii")


@st.composite
def malformed_input(draw: st.DrawFn, data: Path) -> bytes:
    """Input no compaction may come out of."""
    doc = draw(well_formed_event(data))
    doc["messages"].append({"role": "user", "text": "é — not ASCII", "toolUses": []})
    kind = draw(st.sampled_from(["bytes", "utf16", "latin1", "cut", "deep", "shape", "not-object", "no-messages"]))
    if kind == "bytes":
        return draw(st.binary(max_size=2000))
    if kind == "utf16":
        # A drawn text may hold a lone surrogate, which UTF-16 can only carry as it stands.
        return json.dumps(doc, ensure_ascii=False).encode("utf-16", errors="surrogatepass")
    if kind == "latin1":
        return json.dumps({**doc, "cwd": "café"}, ensure_ascii=False).encode("latin-1", errors="replace")
    if kind == "cut":
        raw = encode(doc)
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if kind == "deep":
        depth = draw(st.integers(1_000, 200_000))
        return b'{"messages": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == "shape":
        broken = draw(st.sampled_from(
            [{"role": "robot"}, {"role": "user", "text": 5}, {"role": "user", "toolUses": "x"}, None, [], "text"]
        ))
        doc["messages"].append(broken)
        return encode(doc)
    if kind == "not-object":
        return encode(draw(st.one_of(json_leaf, st.lists(json_leaf, max_size=3))))
    return encode({k: v for k, v in doc.items() if k != "messages"})


def run_hook(stdin: bytes, data: Path) -> dict[str, Any]:
    cwd = data.parent / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-I", str(HOOK)],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=hook_env(data, FAST_JEV_STDIN_IDLE_SECONDS="1"),
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 0
    assert proc.stderr == b""
    text = proc.stdout.decode("utf-8")  # strict: the answer is always valid UTF-8
    assert text.endswith("\n") and text.count("\n") == 1, text[:300]
    answer = json.loads(text)
    assert isinstance(answer, dict) and answer["action"] in ("replace", "fallback", "skip"), answer
    assert isinstance(answer.get("log", []), list)
    assert list(cwd.iterdir()) == []  # a relative pluginData never writes into the cwd
    if answer["action"] == "replace":
        assert isinstance(answer["messages"], list) and answer["messages"]
    else:
        assert isinstance(answer["reason"], str) and answer["reason"]
    return answer


FUZZ = settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(data=st.data())
def test_malformed_input_gets_one_fallback_answer(tmp_path: Path, data: st.DataObject) -> None:
    stdin = data.draw(malformed_input(tmp_path / "data"))
    assert run_hook(stdin, tmp_path / "data")["action"] != "replace"


@FUZZ
@given(data=st.data())
@example(data=None)  # the empty session
def test_hostile_but_valid_events_get_exactly_one_answer(tmp_path: Path, data: st.DataObject | None) -> None:
    doc = data.draw(well_formed_event(tmp_path / "data")) if data is not None else {"messages": []}
    run_hook(encode(doc), tmp_path / "data")


def test_huge_texts_and_a_hundred_thousand_messages_get_one_answer(tmp_path: Path) -> None:
    # One bounded example each: a 4 MB tool output, and 100k one-line messages.
    huge = {"role": "user", "text": "", "toolUses": [], "toolResults": [{"tool_use_id": "t", "text": "x\ud800" * (2 << 20)}]}
    call = {"role": "assistant", "text": "", "toolUses": [{"tool_use_id": "t", "tool": "Bash", "input": {}, "text": ""}]}
    run_hook(encode({"messages": [{"role": "user", "text": "go", "toolUses": []}, call, huge]}), tmp_path / "a")
    many = [{"role": "user" if k % 2 == 0 else "assistant", "text": f"m{k}", "toolUses": []} for k in range(100_000)]
    assert run_hook(encode({"messages": many}), tmp_path / "b")["action"] != "replace"  # nothing to free
