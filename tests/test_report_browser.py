"""``fast-jev report --html`` in a real headless Chromium, from a real compaction's log.

The log is written by the real hook entry (a subprocess with the session.compact event on stdin)
compacting examples/session.jsonl, plus a fallback in the same session; the page is written by
the real CLI; Chromium (the Debian package) loads it from disk with networking off. The rendered
DOM must hold one row per logged decision with its keep / truncate / drop word, and the
screenshot must be the right size and show the three decision colours.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from html.parser import HTMLParser
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from fast_jev_compaction.audit import DecisionLog
from fast_jev_compaction.audit.html import KIND_COLOURS
from fast_jev_compaction.audit.session import decision_kind
from fast_jev_compaction.conversation.transcript import read_messages

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "fast_jev_hook.py"
EXAMPLE = REPO / "examples" / "session.jsonl"
SESSION = "5f0c7a52-1d2e-4c1b-9a61-3d6f0f6f2a10"
INJECTED = "echo '<script>document.title=\"pwned\"</script>'"
WIDTH, HEIGHT = 1280, 1600
# A safety net so a hung child fails the test instead of the whole run; never asserted on.
SAFETY_TIMEOUT = 120


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium binary on PATH (Debian: apt-get install -y chromium; .ci/run installs it)")


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars", f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        timeout=SAFETY_TIMEOUT,
        env={**os.environ, "HOME": str(profile)},
    )


def _hook(event: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY")}
    env["CLAUDE_PLUGIN_DATA"] = str(data_dir)
    proc = subprocess.run(
        [sys.executable, str(HOOK)], input=json.dumps(event).encode(), capture_output=True, env=env,
        timeout=SAFETY_TIMEOUT,
    )
    assert proc.returncode == 0 and proc.stderr == b""
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def _event(messages: list[dict[str, Any]], data_dir: Path, **options: Any) -> dict[str, Any]:
    return {
        "event": "session.compact", "trigger": "manual", "sessionId": SESSION, "pluginRoot": str(REPO),
        "pluginData": str(data_dir), "cwd": str(data_dir), "options": options, "messages": messages,
    }


def _example_with_an_injection() -> list[dict[str, Any]]:
    messages = [m.to_wire() for m in read_messages(EXAMPLE)]
    output = "<script>document.title=\"pwned\"</script>"
    pair = [
        {"role": "assistant", "text": "", "toolUses": [
            {"tool_use_id": "toolu_inject", "tool": "Bash", "input": {"command": INJECTED}, "text": output}]},
        {"role": "user", "text": "", "toolUses": [],
         "toolResults": [{"tool_use_id": "toolu_inject", "text": output, "isError": False}]},
    ]
    return messages[:2] + pair + messages[2:]


class _Rows(HTMLParser):
    """Collects the decision rows, the totals table and every element name of the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.tags: set[str] = set()
        self.sections: list[str] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        self._in_title = tag == "title"
        if tag == "tr" and "call" in (a.get("class") or "").split():
            self.calls.append((a.get("data-call") or "", a.get("data-decision") or ""))
        if tag == "section" and a.get("data-outcome"):
            self.sections.append(a["data-outcome"] or "")

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        else:
            self.text.append(data)


def _png_colours(path: Path) -> tuple[int, int, Counter[tuple[int, int, int]]]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) with the stdlib:
    (width, height, pixel count per colour)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0) and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    previous, colours = bytes(stride), Counter[tuple[int, int, int]]()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:  # Sub: a running sum along each channel
            for c in range(bpp):
                line[c::bpp] = bytes(v & 0xFF for v in accumulate(line[c::bpp]))
        elif kind == 2:  # Up
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind in (3, 4):  # Average, Paeth: byte by byte
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
                if kind == 3:
                    line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
                else:
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        colours.update(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
        previous = bytes(line)
    return width, height, colours


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The report page of a real hook run, and the decision log it was made from."""
    chromium = _chromium()  # skip before doing the work when there is no browser
    assert chromium
    root = tmp_path_factory.mktemp("report")
    data_dir = root / "plugin-data"
    replaced = _hook(_event(_example_with_an_injection(), data_dir), data_dir)
    assert replaced["action"] == "replace"
    chat = [{"role": "user", "text": "hello", "toolUses": []}, {"role": "assistant", "text": "hi", "toolUses": []}]
    # /compact with nothing to prune skips; with a minimum reduction set it falls back.
    assert _hook(_event(chat, data_dir, minReductionRatio=0.25), data_dir)["action"] == "fallback"
    db, out = data_dir / "decisions.sqlite", root / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "report", "last", "--html", str(out), "--db", str(db)],
        capture_output=True, text=True, timeout=SAFETY_TIMEOUT, cwd=root,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"wrote {out} (2 compaction(s) of session {SESSION})\n"
    # Nothing to fetch: the only URLs a page may hold are file:// links to archived output.
    assert not re.search(r"https?:|<(script|link|img)\b|url\(", out.read_text(encoding="utf-8"), re.IGNORECASE)
    return out, db


def test_the_rendered_dom_has_one_row_per_logged_decision(page: tuple[Path, Path], tmp_path: Path) -> None:
    out, db = page
    with DecisionLog(db, create=False) as log:
        [first, second] = log.compactions(session_id=SESSION)
        logged = [(d.call_id, decision_kind(d.action)) for d in log.decisions_for(first.id or 0)]
    assert (first.outcome, second.outcome) == ("replaced", "fallback")
    assert {kind for _, kind in logged} == {"keep", "truncate", "drop"}

    proc = _browser(_chromium(), tmp_path / "profile", "--dump-dom", out.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Rows()
    dom.feed(proc.stdout.decode("utf-8"))
    assert dom.calls == logged
    assert dom.sections == ["replaced", "fallback"]
    text = " ".join(" ".join(dom.text).split())
    assert "Compactions 2 Replaced 1 Fallback 1 Skipped 0" in text
    assert f"fallback ×1: {second.fallback_reason}" in text and second.fallback_reason == "below-ratio"
    # The injected tool input is shown as text; no script element exists and none ran.
    assert "script" not in dom.tags
    assert json.dumps({"command": INJECTED}, separators=(",", ":")) in text
    assert dom.title.startswith("fast-jev compaction report")


def test_the_screenshot_shows_the_three_decision_colours(page: tuple[Path, Path], tmp_path: Path) -> None:
    out, _ = page
    shot = tmp_path / "report.png"
    proc = _browser(
        _chromium(), tmp_path / "profile", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", out.as_uri()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    width, height, colours = _png_colours(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(colours) > 50  # text, bars and badges, not a blank page

    def near(target: tuple[int, int, int]) -> int:
        return sum(n for rgb, n in colours.items() if all(abs(a - b) <= 3 for a, b in zip(rgb, target)))

    # Badges and timeline segments are solid fills: each colour covers a visible area.
    for kind, colour in KIND_COLOURS.items():
        assert near(_rgb(colour)) > 400, kind
