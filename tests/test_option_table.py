"""The option table (options.OPTIONS) is the one source: everything that states an option agrees.

Run ``python tests/test_option_table.py --write`` to rewrite plugin.json's userConfig and the
README's two tables from the table.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from fast_jev_compaction.cli import build_parser
from fast_jev_compaction.hook.config import HookConfig, resolve_hook_config
from fast_jev_compaction.options import OPTION, OPTIONS, CompactOptions, markdown_table, plugin_user_config, read_plugin_options

REPO = Path(__file__).resolve().parents[1]
PLUGIN_JSON = REPO / ".claude-plugin" / "plugin.json"
README = REPO / "README.md"
MOD = REPO / "hooks" / "mod.mjs"
SECTION = re.compile(r"(<!-- options:(plugin|cli) -->\n)(.*?)(<!-- /options:\2 -->)", re.DOTALL)


def readme_tables(text: str) -> dict[str, str]:
    return {m.group(2): m.group(3) for m in SECTION.finditer(text)}


def test_plugin_json_user_config_is_the_table() -> None:
    manifest = json.loads(PLUGIN_JSON.read_text(encoding="utf-8"))
    assert manifest["userConfig"] == plugin_user_config()


def test_readme_tables_are_the_table() -> None:
    tables = readme_tables(README.read_text(encoding="utf-8"))
    assert tables == {"plugin": markdown_table("plugin"), "cli": markdown_table("cli")}


def test_cli_flags_are_the_table() -> None:
    compact = build_parser()._subparsers._group_actions[0].choices["compact"]  # type: ignore[union-attr]
    flags = {
        action.dest: (action.option_strings, action.default)
        for action in compact._actions
        if action.option_strings and action.dest != "help"
    }
    expected = {
        o.name: ([o.flag, *([o.short] if o.short else [])], o.default) for o in OPTIONS if "cli" in o.where
    }
    assert flags == expected


def test_hook_config_and_core_options_are_the_table() -> None:
    hook_fields = {f.name for f in dataclasses.fields(HookConfig)} - {"notes"}
    assert hook_fields == {o.name for o in OPTIONS if "hook" in o.where}
    # Three library-only fields: the archive folder (the hook and the CLI set it from where they
    # keep files), the rules switch (for evaluations) and the engine's count of the context (the
    # hook reads it from the event).
    library_only = {"archive_dir", "use_rules", "context_tokens"}
    assert {f.name for f in dataclasses.fields(CompactOptions)} - library_only == {o.name for o in OPTIONS if "core" in o.where}
    defaults = resolve_hook_config({})
    for name in hook_fields:
        assert getattr(defaults, name) == OPTION[name].default, name
    for field in dataclasses.fields(CompactOptions):
        if field.name != "goal" and field.name not in library_only:
            assert field.default == OPTION[field.name].default, field.name


def test_the_mod_states_the_same_defaults() -> None:
    source = MOD.read_text(encoding="utf-8")
    for constant, name in (("DEFAULT_TIMEOUT_SECONDS", "timeout_seconds"), ("DEFAULT_COMPACT_AT_PERCENT", "compact_at_percent")):
        match = re.search(rf"const {constant} = ([\d.]+)", source)
        assert match is not None and float(match.group(1)) == OPTION[name].default


def test_the_default_model_and_the_key_variables_are_stated_once() -> None:
    sources = [p for p in (REPO / "src").rglob("*.py")]
    model = [p.name for p in sources if '"jev-latest"' in p.read_text(encoding="utf-8")]
    assert model == ["options.py"]
    keys = [p.name for p in sources if re.search(r'\(\s*"TYPESAFE_API_KEY"\s*,', p.read_text(encoding="utf-8"))]
    assert keys == ["options.py"]


@pytest.mark.parametrize(
    ("raw", "expected", "noted"),
    [
        ({"keepThreshold": 7}, 0.5, True),
        ({"keepThreshold": float("nan")}, 0.5, True),
        ({"keepThreshold": "0.7"}, 0.5, True),
        ({"keepThreshold": 0.7}, 0.7, False),
        ({"preserveRecentMessages": 2.7}, 2, False),  # the settings UI only knows "number"
        ({"preserveRecentMessages": -1}, 6, True),  # out of range: the default, not a clamp
        ({"preserveRecentMessages": True}, 6, True),
    ],
)
def test_the_hook_policy_takes_the_default_and_says_so(raw: dict, expected: float, noted: bool) -> None:
    values, notes = read_plugin_options(raw)
    name = {"keepThreshold": "keep_threshold", "preserveRecentMessages": "preserve_recent_messages"}[next(iter(raw))]
    assert values[name] == expected
    assert bool(notes) is noted
    if noted:
        assert notes[0].startswith(f"option {next(iter(raw))}=")


def test_a_bad_key_value_is_never_echoed() -> None:
    _, notes = read_plugin_options({"apiKey": 12345})
    assert notes == ["option apiKey=(hidden) ignored (expected text); using $TYPESAFE_API_KEY"]


def write() -> None:
    manifest = json.loads(PLUGIN_JSON.read_text(encoding="utf-8"))
    manifest["userConfig"] = plugin_user_config()
    PLUGIN_JSON.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    text = README.read_text(encoding="utf-8")
    text = SECTION.sub(lambda m: m.group(1) + markdown_table(m.group(2)) + m.group(4), text)  # type: ignore[arg-type]
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__" and "--write" in sys.argv:
    write()
