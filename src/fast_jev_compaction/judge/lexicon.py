"""The lexicon of tools and shell commands: what kind of work a call is, and what names it.

Shared by the embedded judge (which reads the Jev state) and the feature extraction (which reads
the messages): both classify a call the same way.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_FILEISH = re.compile(r"[\w.\-/~]*[\w\-]\.[A-Za-z0-9]{1,6}$|[\w.\-~]*/[\w.\-/]+")


_KIND_BY_TOOL: Mapping[str, str] = {
    "read": "read",
    "notebookread": "read",
    "view": "read",
    "read_file": "read",
    "grep": "search",
    "glob": "search",
    "ls": "search",
    "websearch": "search",
    "toolsearch": "search",
    "listmcpresourcestool": "search",
    "readmcpresourcetool": "search",
    "webfetch": "fetch",
    "edit": "edit",
    "write": "edit",
    "multiedit": "edit",
    "notebookedit": "edit",
    "str_replace_based_edit_tool": "edit",
    "apply_patch": "edit",
    "askuserquestion": "decision",
    "exitplanmode": "decision",
    "enterplanmode": "decision",
    "task": "agent",
    "agent": "agent",
    "taskoutput": "agent",
    "todowrite": "todo",
    "todoread": "todo",
    "taskcreate": "todo",
    "taskupdate": "todo",
    "tasklist": "todo",
    "taskget": "todo",
    "killshell": "side_effect",
    "killbash": "side_effect",
}
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SHELL_TOOLS = frozenset({"bash", "shell", "powershell", "exec_command", "run_command", "local_shell"})
FILE_KINDS = frozenset({"read", "edit"})
# Re-runnable kinds: an identical later call makes the earlier output redundant.
RERUNNABLE_KINDS = frozenset({"read", "search", "fetch", "inspect", "test_build", "todo", "shell"})

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

_SIDE_EFFECT_PATTERNS = [
    r"\bgit\s+(?:-[a-z]\s+\S+\s+)*(?:commit|push|merge|rebase|reset|revert|cherry-pick|tag|am|apply|"
    r"stash|checkout|switch|rm|mv|clean|pull|fetch|clone|init|restore|add|submodule|worktree)\b",
    r"\b(?:npm|pnpm|yarn|bun|pip3?|uv|poetry|cargo|gem|brew|apt-get|apt|yum|dnf|apk|conda|composer|go)\b"
    r"[^|;&\n]*?\b(?:install|add|remove|uninstall|publish|upgrade|i|ci|get)\b",
    r"(?:^|[\s;&|(])(?:rm|rmdir|mv|cp|mkdir|touch|chmod|chown|ln|kill|pkill|killall|dd|truncate|"
    r"shred|tee|unlink|install)\s",
    r"\bsed\s+(?:-[a-z]*i|--in-place)",
    r"\bcurl\b.*(?:-x\s*(?:post|put|patch|delete)|--request\s*=?\s*(?:post|put|patch|delete)|\s-d\s|"
    r"--data|\s-f\s|--form|--upload-file)",
    r"\bwget\b.*--post",
    r"\b(?:deploy|publish)\b",
    r"\b(?:kubectl|helm)\s+(?:apply|delete|create|install|upgrade|uninstall|rollout|scale|patch|replace)\b",
    r"\bterraform\s+(?:apply|destroy|import)\b",
    r"\bdocker(?:\s+compose|-compose)?\s+(?:push|run|rm|rmi|build|up|down|stop|kill|exec|tag)\b",
    r"\bgh\s+(?:pr|issue|release|repo|workflow|run)\s+(?:create|merge|close|comment|edit|delete|"
    r"run|review|rerun|cancel)\b",
    r"\b(?:systemctl|service)\b.*\b(?:start|stop|restart|enable|disable|reload)\b",
    r"\b(?:psql|mysql|sqlite3)\b.*\b(?:insert|update|delete|drop|create|alter)\b",
    r"\b(?:migrate|alembic\s+upgrade)\b",
    r"\b(?:ssh|scp|rsync)\s",
    r"(?:^|[^0-9&>\-=])>>?\s*(?!&|/dev/null)[^\s&|;>]",  # redirection into a file
]
_SIDE_EFFECT = re.compile("|".join(f"(?:{p})" for p in _SIDE_EFFECT_PATTERNS))
_TEST_BUILD = re.compile(
    r"\b(?:pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|tsc|mypy|pyright|ruff|"
    r"flake8|pylint|eslint|clippy|unittest)\b"
    r"|\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|check|typecheck|compile)\b"
    r"|\bcargo\s+(?:test|build|check|clippy|run|bench)\b"
    r"|\bgo\s+(?:test|build|vet|run)\b"
    r"|\b(?:make|cmake|ninja|gradle|gradlew|mvn|bazel)\b"
    r"|\bdotnet\s+(?:build|test)\b"
)
_INSPECT_PROGRAMS = frozenset(
    """ls cat head tail grep rg ag find fd wc tree pwd echo printf which whereis file stat du df env
    printenv whoami date type less more sort uniq cut awk sed jq yq diff cd true test nl realpath
    basename dirname uname id hostname ps top""".split()
)
_INSPECT_GIT = frozenset({"status", "diff", "log", "show", "branch", "remote", "rev-parse", "blame", "ls-files", "grep"})
_COMMAND_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_WRAPPERS = frozenset({"sudo", "time", "nice", "nohup", "exec", "command", "npx", "bunx", "pnpx"})
# Heads too common in prose to say anything when a later text contains them.
GENERIC_HEADS = frozenset(
    """cd cat echo ls sed awk bash sh zsh python python3 node ruby perl env find grep head tail
    printf test true""".split()
)
_TWO_WORD_PROGRAMS = frozenset(
    {"git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "docker", "kubectl", "gh", "pip", "pip3",
     "uv", "poetry", "make", "terraform", "helm", "dotnet", "brew"}
)



def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]



def tool_kind(tool: str, fields: Mapping[str, Any]) -> str:
    """read, search, fetch, edit, decision, agent, todo, side_effect, test_build, inspect, shell or other."""
    name = tool.strip().lower()
    kind = _KIND_BY_TOOL.get(name)
    if kind is not None:
        return kind
    if name in _SHELL_TOOLS:
        command = fields.get("command", fields.get("cmd", ""))
        return shell_kind(command if isinstance(command, str) else "")
    # mcp__server__verb_noun, or CamelCase (SendMessage, TeamCreate): look at the words
    short = _CAMEL_BOUNDARY.sub("_", tool.strip().rsplit("__", 1)[-1]).lower()
    if _MUTATING_VERB.search(short):
        return "side_effect"
    if _READING_VERB.search(short):
        return "search"
    return "other"


def program_words(segment: str) -> list[str]:
    words = segment.split()
    while words and (_ENV_ASSIGN.match(words[0]) or words[0] in _WRAPPERS):
        words.pop(0)
    if len(words) >= 2 and words[0] == "timeout":
        words = words[2:]
    if len(words) >= 3 and words[0] in ("uv", "poetry", "pdm", "pipenv") and words[1] == "run":
        words = words[2:]
    if len(words) >= 3 and re.fullmatch(r"python3?(\.\d+)?", words[0]) and words[1] == "-m":
        words = words[2:]
    return words


def shell_kind(command: str) -> str:
    lowered = command.lower()
    if _SIDE_EFFECT.search(lowered):
        return "side_effect"
    if _TEST_BUILD.search(lowered):
        return "test_build"
    segments = [s for s in _COMMAND_SPLIT.split(lowered) if s.strip()]
    if segments and all(_is_inspect(s) for s in segments):
        return "inspect"
    return "shell"


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
    segments = [s for s in _COMMAND_SPLIT.split(command.strip()) if s.strip()]
    # `cd dir && make` is about make, not cd
    chosen = ""
    for segment in segments:
        words = program_words(segment)
        if words and basename(words[0]) != "cd":
            chosen = segment
            break
    words = program_words(chosen)
    if not words:
        return ""
    program = basename(words[0]).lower()
    if program in _TWO_WORD_PROGRAMS and len(words) > 1 and not words[1].startswith("-"):
        if words[1] == "run" and len(words) > 2 and program in ("npm", "pnpm", "yarn", "bun"):
            return f"{program} run {words[2].lower()}"
        return f"{program} {words[1].lower()}"
    return program


def command_file_terms(command: str) -> list[str]:
    terms: list[str] = []
    for token in command.split():
        token = token.strip("'\"`(),;:")
        if len(token) < 4 or token.startswith("-") or "=" in token or "://" in token:
            continue
        if _FILEISH.fullmatch(token):
            base = basename(token)
            if len(base) >= 4 and base not in terms:
                terms.append(base)
    return terms
