"""What a tool call is, read from its tool name and input: its kind, its target, its command.

Pure and table-driven: the rules (``rules.py``), the markers and the judges all read calls
through this one lexicon, so "a Read of src/app.py" or "a side-effecting git push" means the
same thing everywhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Final, Mapping

from ..textutil import c_encoder

READ: Final = "read"
SEARCH: Final = "search"
FETCH: Final = "fetch"
EDIT: Final = "edit"
DECISION: Final = "decision"
AGENT: Final = "agent"
TODO: Final = "todo"
SIDE_EFFECT: Final = "side_effect"
TEST_BUILD: Final = "test_build"
INSPECT: Final = "inspect"
SHELL: Final = "shell"
OTHER: Final = "other"

KIND_BY_TOOL: Mapping[str, str] = {
    "read": READ,
    "notebookread": READ,
    "view": READ,
    "read_file": READ,
    "grep": SEARCH,
    "glob": SEARCH,
    "ls": SEARCH,
    "websearch": SEARCH,
    "toolsearch": SEARCH,
    "listmcpresourcestool": SEARCH,
    "readmcpresourcetool": SEARCH,
    "webfetch": FETCH,
    "edit": EDIT,
    "write": EDIT,
    "multiedit": EDIT,
    "notebookedit": EDIT,
    "str_replace_based_edit_tool": EDIT,
    "apply_patch": EDIT,
    "askuserquestion": DECISION,
    "exitplanmode": DECISION,
    "enterplanmode": DECISION,
    "task": AGENT,
    "agent": AGENT,
    "taskoutput": AGENT,
    "todowrite": TODO,
    "todoread": TODO,
    "taskcreate": TODO,
    "taskupdate": TODO,
    "tasklist": TODO,
    "taskget": TODO,
    "killshell": SIDE_EFFECT,
    "killbash": SIDE_EFFECT,
}
SHELL_TOOLS: Final = frozenset({"bash", "shell", "powershell", "exec_command", "run_command", "local_shell"})
# Both tables in one: a shell tool's kind is SHELL until its command is read.
_KIND_BY_NAME: Mapping[str, str] = {**KIND_BY_TOOL, **dict.fromkeys(SHELL_TOOLS, SHELL)}

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# MCP and other unknown tools: the verb in the name says whether a call mutates.
_MUTATING_VERB = re.compile(
    r"(?:^|[_\-.])(create|update|delete|remove|send|post|push|merge|write|comment|publish|deploy|"
    r"close|set|add|edit|upload|move|rename|approve|assign|trigger|run|execute|insert|patch|put)"
    r"(?:$|[_\-.])"
)
_READING_VERB = re.compile(
    r"(?:^|[_\-.])(get|list|search|fetch|read|view|find|query|describe|show|lookup|browse|"
    r"status|info)(?:$|[_\-.])"
)
# Each pattern with the words one of which any text it matches (lower-cased) holds: a pattern
# is tried only on a command holding one ("" for a pattern tried on every command). Tried one by
# one, they find a match exactly when their alternation would, several times faster. They search
# the command with a blank in front, which stands for its start: a pattern opening with a
# character class needs no ``^`` branch beside it, and ``re`` then skips to where the class
# matches instead of trying the whole pattern at every position.
_SIDE_EFFECT_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bgit\s+(?:-[a-z]\s+\S+\s+)*(?:commit|push|merge|rebase|reset|revert|cherry-pick|tag|am|apply|"
     r"stash|checkout|switch|rm|mv|clean|pull|fetch|clone|init|restore|add|submodule|worktree)\b", ("git",)),
    (r"\b(?:npm|pnpm|yarn|bun|pip3?|uv|poetry|cargo|gem|brew|apt-get|apt|yum|dnf|apk|conda|composer|go)\b"
     r"[^|;&\n]*?\b(?:install|add|remove|uninstall|publish|upgrade|i|ci|get)\b",
     ("npm", "yarn", "bun", "pip", "uv", "poetry", "cargo", "gem", "brew", "apt", "yum", "dnf", "apk", "conda",
      "composer", "go")),
    (r"[\s;&|(](?:rm|rmdir|mv|cp|mkdir|touch|chmod|chown|ln|kill|pkill|killall|dd|truncate|"
     r"shred|tee|unlink|install)\s", ("",)),
    (r"\bsed\s+(?:-[a-z]*i|--in-place)", ("sed",)),
    (r"\bcurl\b.*(?:-x\s*(?:post|put|patch|delete)|--request\s*=?\s*(?:post|put|patch|delete)|\s-d\s|"
     r"--data|\s-f\s|--form|--upload-file)", ("curl",)),
    (r"\bwget\b.*--post", ("wget",)),
    (r"\b(?:deploy|publish)\b", ("deploy", "publish")),
    (r"\b(?:kubectl|helm)\s+(?:apply|delete|create|install|upgrade|uninstall|rollout|scale|patch|replace)\b",
     ("kubectl", "helm")),
    (r"\bterraform\s+(?:apply|destroy|import)\b", ("terraform",)),
    (r"\bdocker(?:\s+compose|-compose)?\s+(?:push|run|rm|rmi|build|up|down|stop|kill|exec|tag)\b", ("docker",)),
    (r"\bgh\s+(?:pr|issue|release|repo|workflow|run)\s+(?:create|merge|close|comment|edit|delete|"
     r"run|review|rerun|cancel)\b", ("gh",)),
    (r"\b(?:systemctl|service)\b.*\b(?:start|stop|restart|enable|disable|reload)\b", ("systemctl", "service")),
    (r"\b(?:psql|mysql|sqlite3)\b.*\b(?:insert|update|delete|drop|create|alter)\b", ("psql", "mysql", "sqlite3")),
    (r"\b(?:migrate|alembic\s+upgrade)\b", ("migrate", "alembic")),
    (r"\b(?:ssh|scp|rsync)\s", ("ssh", "scp", "rsync")),
    (r"[^0-9&>\-=]>>?\s*(?!&|/dev/null)[^\s&|;>]", (">",)),  # redirection into a file
)
# Each searched only when a command holds one of its words.
_SIDE_EFFECT = tuple((re.compile(pattern), words) for pattern, words in _SIDE_EFFECT_PATTERNS)
# One word boundary on each side of the whole alternation, not of each branch: ``re`` then tries
# one boundary at each position of the command instead of one per branch.
_TEST_BUILD = re.compile(
    r"\b(?:pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|tsc|mypy|pyright|ruff|"
    r"flake8|pylint|eslint|clippy|unittest"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|check|typecheck|compile)"
    r"|cargo\s+(?:test|build|check|clippy|run|bench)"
    r"|go\s+(?:test|build|vet|run)"
    r"|make|cmake|ninja|gradle|gradlew|mvn|bazel"
    r"|dotnet\s+(?:build|test))\b"
)
_INSPECT_PROGRAMS = frozenset(
    """ls cat head tail grep rg ag find fd wc tree pwd echo printf which whereis file stat du df env
    printenv whoami date type less more sort uniq cut awk sed jq yq diff cd true test nl realpath
    basename dirname uname id hostname ps top""".split()
)
_INSPECT_GIT = frozenset({"status", "diff", "log", "show", "branch", "remote", "rev-parse", "blame", "ls-files", "grep"})
_SEPARATOR = re.compile(r"&&|\|\||;|\|")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_WRAPPERS = frozenset({"sudo", "time", "nice", "nohup", "exec", "command", "npx", "bunx", "pnpx"})
_TWO_WORD_PROGRAMS = frozenset(
    {"git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "docker", "kubectl", "gh", "pip", "pip3",
     "uv", "poetry", "make", "terraform", "helm", "dotnet", "brew"}
)
_PYTHON = re.compile(r"python3?(\.\d+)?")
# The input key that names a call's target, by preference.
_TARGET_KEYS = ("file_path", "notebook_path", "command", "url", "pattern", "query", "path", "description", "prompt")
TARGET_CHARS = 100
# ``json.dumps`` with these options, through one C encoder made once: dumps, and the encoder's
# own ``encode``, make one per call, which costs more than encoding most inputs (a search's, a
# read's offset). Inputs come from parsed JSON, never circular: no check for cycles.
_sorted_json = c_encoder(json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True))


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]


def as_text(value: Any, encode: Callable[[Any], str] = _sorted_json) -> str:
    """A value as text: a string as it is, None as nothing, anything else as ``encode``'s JSON
    (the keys sorted by default), or as ``str`` when it is not JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return encode(value)
    except (TypeError, ValueError):
        return str(value)


def _clip(text: str, limit: int) -> str:
    # Blanks folded by split and join: one C call each, where a substitution of every run of
    # blanks makes a match object per run.
    if len(text) > 4 * limit:
        # A long value (a command, a prompt): its head, blanks folded, holds the clip unless it
        # is mostly blanks; its blanks fold the same way as the whole text's.
        head = " ".join(text[: 4 * limit].split())
        if len(head) > limit:
            return head[: limit - 1] + "…"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def command_segments(command: str) -> list[str]:
    """The parts of ``command`` between the separators ``&&``, ``||``, ``;`` and ``|``, without
    the blanks beside each separator. Split at the separators alone, then stripped: a pattern
    opening with ``\\s*`` would be tried at every position of the command, this one only where a
    separator's first character is (and a command holding none of them is one part, unsearched)."""
    if "&" not in command and ";" not in command and "|" not in command:
        return [command]
    parts = _SEPARATOR.split(command)
    last = len(parts) - 1
    if not last:  # a lone "&" separates nothing
        return parts
    return [part.rstrip() if i == 0 else part.lstrip() if i == last else part.strip() for i, part in enumerate(parts)]


def program_words(segment: str) -> list[str]:
    """The words of one command segment, without env assignments and wrappers (sudo, uv run…)."""
    words = segment.split()
    # Each pattern only on a word that can match it: an assignment holds "=", a python starts so.
    while words and (words[0] in _WRAPPERS or ("=" in words[0] and _ENV_ASSIGN.match(words[0]))):
        words.pop(0)
    if len(words) >= 2 and words[0] == "timeout":
        words = words[2:]
    if len(words) >= 3 and words[0] in ("uv", "poetry", "pdm", "pipenv") and words[1] == "run":
        words = words[2:]
    if len(words) >= 3 and words[0].startswith("python") and _PYTHON.fullmatch(words[0]) and words[1] == "-m":
        words = words[2:]
    return words


def shell_kind(command: str) -> str:
    lowered = command.lower()
    kind = _effect_kind(lowered)
    if kind != SHELL:
        return kind
    # Inspecting when it has a segment and every segment inspects: the first that does not decides.
    inspects = False
    for segment in command_segments(lowered):
        if segment.strip():
            if not _is_inspect(segment):
                return SHELL
            inspects = True
    return INSPECT if inspects else SHELL


def _effect_kind(lowered: str) -> str:
    """SIDE_EFFECT or TEST_BUILD for a lower-cased command that is one, else SHELL (whether it
    only inspects is not looked at)."""
    padded = " " + lowered  # the blank the side-effect patterns read as the command's start
    # Plain loops: a generator per pattern cost more than most of the searches it guards.
    for pattern, words in _SIDE_EFFECT:
        for word in words:
            if word in lowered:
                if pattern.search(padded):
                    return SIDE_EFFECT
                break
    return TEST_BUILD if _TEST_BUILD.search(lowered) else SHELL


def _is_inspect(segment: str) -> bool:
    words = program_words(segment)
    if not words:
        return True
    program = basename(words[0])
    if program == "git":
        return len(words) > 1 and words[1] in _INSPECT_GIT
    return program in _INSPECT_PROGRAMS


def command_head(command: str) -> str:
    """The part of a command that names what ran: ``pytest``, ``npm test``, ``git push``."""
    words: list[str] = []
    for segment in command_segments(command.strip()):  # `cd dir && make` is about make, not cd
        found = program_words(segment)
        if found and basename(found[0]) != "cd":
            words = found
            break
    if not words:
        return ""
    program = basename(words[0]).lower()
    if program in _TWO_WORD_PROGRAMS and len(words) > 1 and not words[1].startswith("-"):
        if words[1] == "run" and len(words) > 2 and program in ("npm", "pnpm", "yarn", "bun"):
            return f"{program} run {words[2].lower()}"
        return f"{program} {words[1].lower()}"
    return program


def tool_kind(tool: str, fields: Mapping[str, Any]) -> str:
    kind = _name_kind(tool, tool.strip().lower())
    return shell_kind(_shell_command(fields)) if kind == SHELL else kind


def _name_kind(tool: str, name: str) -> str:
    """What ``tool``'s name (``name``: lower-cased, stripped) says of its kind: the table's kind,
    SHELL for a shell tool (its command says more), or what the words of the name say."""
    return _KIND_BY_NAME.get(name) or _named_kind(tool)


def _shell_command(fields: Mapping[str, Any]) -> str:
    return as_text(fields.get("command", fields.get("cmd", "")))


def _named_kind(tool: str) -> str:
    """The kind of a tool that is neither in the table nor a shell."""
    # mcp__server__verb_noun, or CamelCase (SendMessage, TeamCreate): look at the words
    short = _CAMEL_BOUNDARY.sub("_", tool.strip().rsplit("__", 1)[-1]).lower()
    if _MUTATING_VERB.search(short):
        return SIDE_EFFECT
    if _READING_VERB.search(short):
        return SEARCH
    return OTHER


@dataclass(frozen=True, slots=True)  # one per call, beside its facts
class CallShape:
    """What one call is: its kind and the keys that say when two calls did the same thing."""

    # As :func:`tool_kind` has it, except that a shell command neither changing anything nor
    # running tests is SHELL here whether it only inspects or not: no reader of a shape tells
    # the two apart, and finding out reads every segment of the command.
    kind: str
    file: str = ""  # the file a read or an edit targets
    span: str = ""  # offset:limit of a partial read; "" for the whole file
    command: str = ""  # the whitespace-normalised command of a shell call
    head: str = ""  # the command's program (pytest, npm test), for test/build runs only
    rerun_key: str = ""  # two calls with the same key produce the same output


def call_shape(tool: str, fields: Mapping[str, Any]) -> CallShape:
    # Shapes made with their fields in order (kind, file, span, command, head, rerun_key): by
    # name, making one costs about twice as much.
    name = tool.strip().lower()
    kind = _name_kind(tool, name)
    if kind == SHELL:
        command = _shell_command(fields)
        kind = _effect_kind(command.lower())
        if fields.get("command", fields.get("cmd")) is None:
            return CallShape(kind)
        normalized = " ".join(command.split())
        # Only a test/build run is matched by its program; a failed call of another kind
        # works out its head where the rules need it (rules._link).
        head = command_head(normalized) if kind == TEST_BUILD else ""
        return CallShape(kind, "", "", normalized, head, f"cmd:{normalized}" if normalized else "")
    if kind == READ or kind == EDIT:
        for key in ("file_path", "notebook_path", "path"):
            path = fields.get(key)
            if isinstance(path, str) and path.strip():
                offset, limit = fields.get("offset"), fields.get("limit")
                span = "" if offset in (None, "", 0, 1) and limit in (None, "") else f"{as_text(offset)}:{as_text(limit)}"
                return CallShape(kind, path, span, "", "", f"read:{path}:{span}" if kind == READ else "")
    if kind == TODO and name == "todowrite":
        return CallShape(kind, "", "", "", "", "todo")
    if kind == SEARCH or kind == FETCH:
        return CallShape(kind, "", "", "", "", f"{name}:{as_text(dict(fields))}")
    return CallShape(kind)


def call_target(tool: str, fields: Mapping[str, Any]) -> str:
    """A short, readable name for what a call targeted: a path, a command, a URL, a query."""
    for key in _TARGET_KEYS:
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            target = _clip(value, TARGET_CHARS)
            if key in ("file_path", "notebook_path") and (fields.get("offset") or fields.get("limit")):
                target += f" (lines from {as_text(fields.get('offset') or 1)}, limit {as_text(fields.get('limit'))})"
            return target
    if not fields:
        return ""
    return _clip(" ".join(f"{k}={as_text(v)}" for k, v in fields.items()), TARGET_CHARS)
