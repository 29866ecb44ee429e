"""Helpers that drive the real ``claude`` binary against the scripted fake Messages API.

The binary comes from ``$CLAUDE_BIN`` or ``.e2e-cache`` (``.ci/install-claude.sh`` fills it on
first use). :class:`Claude` runs ``claude -p`` in a throwaway HOME and reads back what a run
left: stream-json events, the transcript, hook.log and the decision log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fake_anthropic import FakeAnthropic

REPO = Path(__file__).resolve().parents[2]
CLAUDE_VERSION = "2.1.332"
DEFAULT_BIN = REPO / ".e2e-cache" / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
PLUGIN_NAME = "fast-jev-compaction"
PLUGIN_FILES = (".claude-plugin", "hooks", "commands", "LICENSE", "README.md", "pyproject.toml")
# Only a guard against a hung binary; tests never assert on time.
RUN_TIMEOUT = 180


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_claude() -> tuple[Path | None, str]:
    """The binary, or None and the reason the e2e tests skip."""
    explicit = os.environ.get("CLAUDE_BIN")
    if explicit:
        path = Path(explicit)
        return (path, "") if _usable(path) else (None, f"CLAUDE_BIN={explicit} is not an executable file")
    if _usable(DEFAULT_BIN):
        return DEFAULT_BIN, ""
    script = REPO / ".ci" / "install-claude.sh"
    try:
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"could not run {script}: {exc}"
    printed = proc.stdout.strip().splitlines()
    if printed and _usable(Path(printed[-1])):
        return Path(printed[-1]), ""
    why = proc.stderr.strip().splitlines()
    return None, f"claude {CLAUDE_VERSION} is not installed and {script.name} could not install it: {why[-1] if why else 'no reason printed'}"


@dataclass
class ClaudeRun:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        results = [e for e in self.events if e.get("type") == "result"]
        assert results, f"no result event (exit {self.returncode}): {self.stderr[-2000:]}"
        return results[-1]

    @property
    def session_id(self) -> str:
        return str(self.result["session_id"])

    def system(self, subtype: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == "system" and e.get("subtype") == subtype]

    def toasts(self) -> list[str]:
        return [str(e["text"]) for e in self.system("ui_toast") if e.get("plugin") == PLUGIN_NAME]

    def logs(self) -> list[str]:
        return [str(e["text"]) for e in self.system("ui_log") if e.get("plugin") == PLUGIN_NAME]

    def boundaries(self) -> list[dict[str, Any]]:
        return [e["compact_metadata"] for e in self.system("compact_boundary")]


def isolated_env(home: Path) -> dict[str, str]:
    """The environment every ``claude`` run gets: a throwaway HOME, telemetry and updates off.

    Nothing of an enclosing Claude Code session (or a real key) may leak into the run, and
    nothing the run writes may land in the user's own ``~/.claude``.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLAUDE", "ANTHROPIC", "FAST_JEV")) and k not in ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY")
    }
    env.update(
        HOME=str(home),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
    )
    return env


@dataclass
class Claude:
    """One throwaway HOME and project folder, and helpers to run ``claude -p`` in them."""

    bin: Path
    root: Path
    plugin: Path
    api: FakeAnthropic
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def data_dir(self) -> Path:
        return self.home / ".claude" / "plugins" / "data" / f"{PLUGIN_NAME}-inline"

    def env(self) -> dict[str, str]:
        env = isolated_env(self.home)
        env.update(
            ANTHROPIC_BASE_URL=self.api.url,
            ANTHROPIC_API_KEY="test",
            IS_SANDBOX="1",  # root may not bypass permissions otherwise
            FAST_JEV_PYTHON=sys.executable,
        )
        env.update(self.extra_env)
        return env

    def settings(self, **options: Any) -> Path:
        """A --settings file giving the inline plugin these options."""
        path = self.root / f"settings-{len(list(self.root.glob('settings-*.json')))}.json"
        path.write_text(json.dumps({"pluginConfigs": {f"{PLUGIN_NAME}@inline": {"options": options}}}))
        return path

    def argv(
        self, prompt: str, *extra: str, resume: str | None = None, settings: Path | None = None,
        permission_mode: str = "bypassPermissions",
    ) -> list[str]:
        argv = [str(self.bin), "-p", prompt, "--plugin-dir", str(self.plugin), "--permission-mode", permission_mode]
        argv += ["--output-format", "stream-json", "--verbose"]
        if resume:
            argv += ["--resume", resume]
        if settings:
            argv += ["--settings", str(settings)]
        return argv + list(extra)

    def run(
        self, prompt: str, *extra: str, resume: str | None = None, settings: Path | None = None,
        permission_mode: str = "bypassPermissions",
    ) -> ClaudeRun:
        proc = subprocess.run(
            self.argv(prompt, *extra, resume=resume, settings=settings, permission_mode=permission_mode),
            cwd=self.project,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        events = []
        for line in proc.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
        return ClaudeRun(proc.returncode, events, proc.stderr)

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        [path] = list((self.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def hook_log(self) -> str:
        path = self.data_dir / "hook.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def decisions(self) -> list[tuple[Any, list[Any]]]:
        from fast_jev_compaction.audit.store import open_log

        log = open_log(self.data_dir / "decisions.sqlite")  # replays the mod's spill entries
        if log is None:
            return []
        with log:
            return [(row, log.decisions_for(row.id or 0)) for row in log.compactions()]


def wait_for(read: Callable[[], Any], done: Callable[[Any], bool], attempts: int = 240) -> Any:
    """Poll an outside process's state; the loop is bounded, and nothing asserts on its timing."""
    value = None
    for _ in range(attempts):
        try:
            value = read()
        except Exception:  # noqa: BLE001 - the hook may be creating the log right now
            value = None
        if value is not None and done(value):
            return value
        time.sleep(0.25)
    return value


@dataclass
class Tui:
    """An interactive ``claude`` in a detached tmux session: the only way to reach turn.complete's
    ``$.session.compact()``, which a headless session refuses."""

    claude: Claude
    tmux: str
    socket: str = field(default_factory=lambda: f"fjtest-{os.getpid()}-{time.monotonic_ns()}")

    def start(self, settings: Path | None = None) -> str:
        """Start the session past onboarding and trust; the first screen."""
        claude = self.claude
        (claude.home / ".claude.json").write_text(
            json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "lastOnboardingVersion": CLAUDE_VERSION,
                    "theme": "dark",
                    "bypassPermissionsModeAccepted": True,
                    "customApiKeyResponses": {"approved": ["test"], "rejected": []},
                    "projects": {str(claude.project): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
                }
            )
        )
        headless = ("-p", "x", "--output-format", "stream-json", "--verbose")
        argv = [a for a in claude.argv("x", settings=settings) if a not in headless]
        script = claude.root / "interactive.sh"
        exports = "".join(f"export {k}={json.dumps(v)}\n" for k, v in claude.env().items() if k.isidentifier())
        script.write_text(f"{exports}cd {json.dumps(str(claude.project))}\nexec {' '.join(json.dumps(a) for a in argv)}\n")
        self.command("new-session", "-d", "-s", "fj", "-x", "200", "-y", "50", f"bash {script}")
        return str(wait_for(self.screen, lambda s: "bypass permissions" in s))

    def command(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True, timeout=30).stdout

    def screen(self) -> str:
        return self.command("capture-pane", "-p", "-J", "-t", "fj")

    def scrollback(self) -> str:
        """Everything the session printed, not only what is on screen now."""
        return self.command("capture-pane", "-p", "-J", "-S", "-", "-t", "fj")

    def type(self, text: str) -> None:
        self.command("send-keys", "-t", "fj", "-l", text)
        self.command("send-keys", "-t", "fj", "Enter")

    def close(self) -> None:
        self.command("kill-server")
