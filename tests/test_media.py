"""Images, documents and loaded tools of rebuilt tool results: found, saved for Read, noted.

Shapes as Claude Code 2.1.332 writes them (seen with the real binary): a Read of a PNG is a
``tool_result`` whose content is one ``image`` block in the transcript, and ``text: ""`` with
``result: {"type": "image", "file": {"base64", "type", ...}}`` in the session.compact event; a
PDF adds a ``document`` block after its text; ToolSearch leaves ``tool_reference`` blocks and
``result: {"matches": [...]}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import stat
import struct
import zlib
from pathlib import Path

import pytest

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.decide.archive import write_archive
from fast_jev_compaction.decide.markers import PREFIX
from fast_jev_compaction.hook.event import HookEvent
from fast_jev_compaction.hook.media import Media, found_media, from_content, from_record, transcript_media, with_media, with_notes
from test_hook_entry import event, run_hook, tool_heavy_conversation


def png(width: int = 8, height: int = 8) -> bytes:
    rows = b"".join(b"\x00" + bytes([255, 0, 0] * width) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PNG = png()
PNG64 = base64.b64encode(PNG).decode()
PDF = b"%PDF-1.1\n%%EOF\n"
READ_RECORD = {"type": "image", "file": {"base64": PNG64, "type": "image/png", "originalSize": len(PNG)}}
IMAGE_BLOCK = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}}


def image_messages(result_extra: dict[str, object] | None = None) -> list[SessionMessage]:
    """A prompt, a Read of a PNG, its result (text "" as the engine hands it), a closing answer."""
    return [
        SessionMessage(role="user", text="look at the picture", handle="p1"),
        SessionMessage(role="assistant", toolUses=(ToolUse("toolu_img", "Read", {"file_path": "/p/pic.png"}),), handle="a1"),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_img", "", False, result_extra or {}),), handle="r1"),
        SessionMessage(role="assistant", text="It is red.", handle="a2"),
    ]


def transcript_line(tool_use_id: str, content: object) -> bytes:
    record = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": content}]}}
    return json.dumps(record).encode() + b"\n"


# --------------------------------------------------------------------------- finding


def test_content_blocks_give_images_documents_and_the_loaded_tools_in_order() -> None:
    content = [
        {"type": "text", "text": "PDF file read"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(PDF).decode()}},
        IMAGE_BLOCK,
        {"type": "tool_reference", "tool_name": "CronCreate"},
        {"type": "tool_reference", "tool_name": "CronList"},
    ]
    assert from_content(content) == [
        Media("document", "application/pdf", PDF, len(PDF)),
        Media("image", "image/png", PNG, len(PNG)),
        Media("tools", tools=("CronCreate", "CronList")),
    ]


@pytest.mark.parametrize(
    "source",
    [{"type": "url", "url": "https://example.com/a.png", "media_type": "image/png"}, {"type": "base64", "media_type": "image/png", "data": "not base64!"}],
)
def test_an_image_without_usable_bytes_is_still_found_without_them(source: dict[str, str]) -> None:
    assert from_content([{"type": "image", "source": source}]) == [Media("image", "image/png", None, None)]


def test_text_only_content_has_nothing() -> None:
    assert from_content("plain") == []
    assert from_content([{"type": "text", "text": "x"}, "y", None]) == []


def test_stored_records_of_read_toolsearch_and_mcp_tools() -> None:
    assert from_record(READ_RECORD) == [Media("image", "image/png", PNG, len(PNG))]
    pdf = {"type": "pdf", "file": {"filePath": "/p/doc.pdf", "base64": base64.b64encode(PDF).decode(), "originalSize": len(PDF)}}
    assert from_record(pdf) == [Media("document", "application/pdf", PDF, len(PDF))]
    assert from_record({"matches": ["CronCreate"], "query": "select:CronCreate", "total_deferred_tools": 11}) == [Media("tools", tools=("CronCreate",))]
    assert from_record([{"type": "text", "text": "shot"}, IMAGE_BLOCK]) == [Media("image", "image/png", PNG, len(PNG))]
    # Headless, a tool may store its record less its bulk: the size is still told.
    assert from_record({"type": "image", "file": {"type": "image/png", "originalSize": 48213}}) == [Media("image", "image/png", None, 48213)]
    assert from_record({"stdout": "hello", "isImage": False}) == []
    assert from_record({"matches": []}) == []


def test_only_wanted_tool_results_with_non_text_blocks_are_read_from_the_transcript() -> None:
    lines = [
        transcript_line("toolu_img", [IMAGE_BLOCK]),
        transcript_line("toolu_other", [IMAGE_BLOCK]),
        transcript_line("toolu_text", "an image of text"),
        b"not json but \"tool_result\" and \"image\"\n",
    ]
    assert transcript_media(lines, {"toolu_img", "toolu_text"}) == {"toolu_img": [Media("image", "image/png", PNG, len(PNG))]}


# --------------------------------------------------------------------------- noting


def test_an_empty_image_result_becomes_a_note_naming_its_saved_file(tmp_path: Path) -> None:
    found = {"toolu_img": [Media("image", "image/png", PNG, len(PNG))]}
    messages = image_messages()
    out, files = with_notes(messages, found, str(tmp_path))
    [path] = files
    assert Path(path).name == hashlib.sha256(PNG).hexdigest()[:32] + ".png"
    assert files[path] == PNG
    text = out[2].toolResults[0].text  # type: ignore[index]
    assert text == f"{PREFIX} saved an image/png ({len(PNG)} bytes) of this output at {path}; Read it to see it again]"
    # Everything else is the very same object.
    assert [a is b for a, b in zip(out, messages)] == [True, True, False, True]


def test_a_result_with_text_keeps_it_and_gets_the_note_after_it(tmp_path: Path) -> None:
    messages = [SessionMessage(role="user", toolResults=(ToolResult("toolu_pdf", "PDF file read: /p/doc.pdf (15 bytes)"),))]
    out, _ = with_notes(messages, {"toolu_pdf": [Media("document", "application/pdf", PDF, len(PDF))]}, str(tmp_path))
    head, note = out[0].toolResults[0].text.split("\n")  # type: ignore[index]
    assert head == "PDF file read: /p/doc.pdf (15 bytes)"
    assert note.startswith(f"{PREFIX} saved an application/pdf (15 bytes) of this output at {tmp_path}/") and note.endswith(".pdf; Read it to see it again]")


def test_without_an_archive_the_note_says_what_was_there_and_names_no_file() -> None:
    out, files = with_notes(image_messages(), {"toolu_img": [Media("image", "image/png", PNG, len(PNG))]}, None)
    assert files == {}
    assert out[2].toolResults[0].text == f"{PREFIX} replaced an image/png ({len(PNG)} bytes) of this output with this line; re-run the tool to see it again]"  # type: ignore[index]


def test_a_kind_read_cannot_show_is_described_not_saved(tmp_path: Path) -> None:
    out, files = with_notes(image_messages(), {"toolu_img": [Media("image", "image/tiff", b"II*\x00", 4)]}, str(tmp_path))
    assert files == {}
    assert "replaced an image/tiff (4 bytes)" in out[2].toolResults[0].text  # type: ignore[index]


def test_notes_are_not_repeated_by_a_later_pass(tmp_path: Path) -> None:
    found = {"toolu_img": [Media("image", "image/png", PNG, len(PNG))]}
    once, _ = with_notes(image_messages(), found, str(tmp_path))
    twice, _ = with_notes(once, found, str(tmp_path))
    assert twice[2].toolResults[0].text == once[2].toolResults[0].text  # type: ignore[index]


def test_messages_that_keep_their_handle_and_results_without_media_are_the_same_objects(tmp_path: Path) -> None:
    messages = image_messages()
    out, files = with_notes(messages, {"toolu_elsewhere": [Media("image", "image/png", PNG, len(PNG))]}, str(tmp_path))
    assert files == {} and all(a is b for a, b in zip(out, messages))


# --------------------------------------------------------------------------- the hook edge


def hook_event(messages: list[SessionMessage], config: Path, **extra: object) -> HookEvent:
    return HookEvent(messages=messages, sessionId="sid-1", pluginData=str(config / "plugins" / "data" / "fj-inline"), **extra)  # type: ignore[arg-type]


def test_the_image_is_saved_private_and_readable_from_the_stored_record(tmp_path: Path) -> None:
    archive = tmp_path / "data" / "archive"
    errors: list[str] = []
    messages = image_messages({"result": READ_RECORD})
    out = with_media(hook_event(messages, tmp_path / "config"), str(archive), errors.append)
    [saved] = list(archive.iterdir())
    assert saved.read_bytes() == PNG and saved.suffix == ".png"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and stat.S_IMODE(archive.stat().st_mode) == 0o700
    assert out[2].toolResults[0].text.endswith(f"at {saved}; Read it to see it again]")  # type: ignore[index]
    assert errors == []


def test_the_transcript_gives_the_bytes_a_record_left_out(tmp_path: Path) -> None:
    config = tmp_path / "config"
    session = config / "projects" / "-p" / "sid-1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(transcript_line("toolu_img", [IMAGE_BLOCK]))
    messages = image_messages({"result": {"type": "image", "file": {"type": "image/png", "originalSize": 48213}}})
    archive = tmp_path / "archive"
    out = with_media(hook_event(messages, config), str(archive), [].append)
    [saved] = list(archive.iterdir())
    assert saved.read_bytes() == PNG
    assert str(saved) in out[2].toolResults[0].text  # type: ignore[index]
    # A subagent's results are not in the session transcript: its record is all there is.
    sub = with_media(hook_event(messages, config, agentId="agent-1"), str(tmp_path / "sub"), [].append)
    assert "replaced an image/png (48.2 kB)" in sub[2].toolResults[0].text  # type: ignore[index]


def test_the_transcript_is_opened_only_for_results_a_record_leaves_in_doubt(tmp_path: Path) -> None:
    other = png(4, 4)
    session = tmp_path / "sid-1.jsonl"
    session.write_bytes(transcript_line("toolu_img", [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(other).decode()}}]))
    # A record with the bytes settles it: the transcript's (here different) bytes are not read.
    assert found_media(image_messages({"result": READ_RECORD}), session)["toolu_img"][0].data == PNG
    # An empty result with no record at all: the transcript says what it was.
    assert found_media(image_messages(), session)["toolu_img"][0].data == other
    # A result with text and no telling record: nothing to look up.
    with_text = [SessionMessage(role="user", toolResults=(ToolResult("toolu_img", "some output"),))]
    assert found_media(with_text, session) == {}


def test_an_unwritable_archive_costs_the_path_only(tmp_path: Path) -> None:
    blocker = tmp_path / "archive"
    blocker.write_text("a file where the folder should be")
    errors: list[str] = []
    messages = image_messages({"result": READ_RECORD})
    out = with_media(hook_event(messages, tmp_path / "config"), str(blocker), errors.append)
    assert "replaced an image/png" in out[2].toolResults[0].text and str(blocker) not in out[2].toolResults[0].text  # type: ignore[index]
    assert len(errors) == 1 and "not archived" in errors[0]


def test_pruning_keeps_to_the_archives_own_names(tmp_path: Path) -> None:
    ours = tmp_path / (hashlib.sha256(PNG).hexdigest()[:32] + ".png")
    stranger = tmp_path / "notes.png"
    stranger.write_bytes(b"someone else's")
    write_archive({str(ours): PNG})
    write_archive({str(tmp_path / ("0" * 32 + ".txt")): "x"}, max_bytes=0)
    assert not ours.exists() and stranger.exists()


# --------------------------------------------------------------------------- the spawned hook


def test_the_spawned_hook_saves_a_kept_image_and_notes_the_loaded_tools(tmp_path: Path) -> None:
    """JSON on stdin as the mod sends it (shapes of 2.1.332); the session transcript beside it."""
    config = tmp_path / "config"
    data_dir = config / "plugins" / "data" / "fast-jev-compaction-inline"
    search = {"matches": ["CronCreate", "CronList"], "query": "select:CronCreate,CronList", "total_deferred_tools": 11}
    picture_and_search: list[dict[str, object]] = [
        {"role": "assistant", "text": "Looking at the picture.", "toolUses": [
            {"tool_use_id": "toolu_img", "tool": "Read", "input": {"file_path": "/p/pic.png"}, "result": READ_RECORD, "text": ""},
            {"tool_use_id": "toolu_ts", "tool": "ToolSearch", "input": {"query": "select:CronCreate,CronList"}, "result": search, "text": ""},
        ], "handle": "a-img"},
        {"role": "user", "text": "", "toolUses": [], "toolResults": [
            {"tool_use_id": "toolu_img", "text": "", "isError": False, "result": READ_RECORD},
            {"tool_use_id": "toolu_ts", "text": "", "isError": False, "result": search},
        ], "handle": "r-img"},
    ]
    messages = tool_heavy_conversation()
    messages[1:1] = picture_and_search
    session = config / "projects" / "-p" / "session-1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(transcript_line("toolu_img", [IMAGE_BLOCK]))

    answer, _ = run_hook(json.dumps(event(messages, data_dir)).encode(), data_dir, HOME=str(tmp_path / "home"))

    assert answer["action"] == "replace"
    results = {r["tool_use_id"]: r["text"] for m in answer["messages"] for r in m.get("toolResults") or []}
    saved = data_dir / "archive" / (hashlib.sha256(PNG).hexdigest()[:32] + ".png")
    assert results["toolu_img"] == f"{PREFIX} saved an image/png ({len(PNG)} bytes) of this output at {saved}; Read it to see it again]"
    assert saved.read_bytes() == PNG and stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert results["toolu_ts"] == (
        f'{PREFIX} notes that this search loaded the tools CronCreate, CronList; ToolSearch with "select:CronCreate,CronList" '
        "loads them again if needed]"
    )
    # Results without non-text content are what the compaction made of them, nothing added.
    assert results["toolu_005"] == "hello"


def test_a_dropped_calls_image_is_reachable_from_its_marker(tmp_path: Path) -> None:
    """The judge (a Jev-protocol server answering "not needed" to everything) drops a browser
    call that returned a screenshot: its marker names a saved file, that file names the image."""
    from jev_fault_server import FaultServer, Reply, Seen, answers_body

    def drops_everything(seen: Seen) -> Reply:
        return Reply(body=answers_body(list(seen.json()["questions"]), value=0.01))

    data_dir = tmp_path / "data"
    shot = [{"type": "text", "text": "Screenshot of the page"}, IMAGE_BLOCK]
    script = "document.querySelectorAll('.row').forEach(r => r.scrollIntoView());\n" * 12
    browser: list[dict[str, object]] = [
        {"role": "assistant", "text": "Checking the page.", "toolUses": [
            {"tool_use_id": "toolu_shot", "tool": "mcp__browser__screenshot", "input": {"script": script}, "result": shot,
             "text": "Screenshot of the page"},
        ], "handle": "a-shot"},
        {"role": "user", "text": "", "toolUses": [], "toolResults": [
            {"tool_use_id": "toolu_shot", "text": "Screenshot of the page", "isError": False, "result": shot},
        ], "handle": "r-shot"},
    ]
    messages = tool_heavy_conversation()
    messages[1:1] = browser
    with FaultServer(drops_everything) as server:
        options = {"apiKey": "sk-test-key-that-is-long-enough", "baseUrl": f"{server.url}/v1/systemone", "policy": "threshold"}
        answer, _ = run_hook(json.dumps(event(messages, data_dir, options=options)).encode(), data_dir, HOME=str(tmp_path / "home"))

    assert answer["action"] == "replace"
    assert not any(r["tool_use_id"] == "toolu_shot" for m in answer["messages"] for r in m.get("toolResults") or [])
    marker = next(line for m in answer["messages"] for line in m["text"].splitlines() if "mcp__browser__screenshot call" in line)
    kept_text = Path(marker.split("is saved at ")[1].split(";")[0]).read_text(encoding="utf-8")
    image = data_dir / "archive" / (hashlib.sha256(PNG).hexdigest()[:32] + ".png")
    assert kept_text == f"Screenshot of the page\n{PREFIX} saved an image/png ({len(PNG)} bytes) of this output at {image}; Read it to see it again]"
    assert image.read_bytes() == PNG
