"""Nothing planted in the user's project runs, and the bootstrap installs exactly the pinned versions.

Claude Code starts the bootstrap (hooks/hooks.json) and the hook (hooks/mod.mjs) from the
project folder. A repository holding venv.py, pip.py or sitecustomize.py must not get its code
run: real processes, started exactly as hooks.json and the mod start them, from a folder full of
planted modules that each leave a marker when imported.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from test_bootstrap import SAFETY_TIMEOUT, bootstrap_env, wheel  # noqa: F401 - wheel is a fixture

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "fast_jev_hook.py"
CONSTRAINTS = REPO / "hooks" / "constraints.txt"
PLANTED = ("venv", "pip", "ensurepip", "sitecustomize", "usercustomize", "fast_jev_compaction")


@pytest.fixture()
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A hostile project folder: every planted module writes a marker when imported."""
    folder = tmp_path / "project"
    markers = tmp_path / "markers"
    folder.mkdir()
    markers.mkdir()
    for name in PLANTED:
        code = f"open({str(markers / name)!r}, 'w').write('ran')\n"
        if name == "fast_jev_compaction":
            (folder / name).mkdir()
            (folder / name / "__init__.py").write_text(code)
        else:
            (folder / f"{name}.py").write_text(code)
    return folder, markers


def hostile_env(base: dict[str, str], project: Path) -> dict[str, str]:
    # What a user's shell may carry; -I and the bootstrap's clean environment must ignore it.
    return {**base, "PYTHONPATH": str(project), "PYTHONSTARTUP": str(project / "venv.py"), "PYTHONUSERBASE": str(project)}


def test_the_planted_modules_would_run_without_isolation(project: tuple[Path, Path]) -> None:
    # The control: from this folder, a plain `python -m venv` imports the planted venv.py.
    folder, markers = project
    subprocess.run([sys.executable, "-m", "venv", "--help"], cwd=folder, capture_output=True, timeout=SAFETY_TIMEOUT)
    assert (markers / "venv").exists()


def session_start_command(data: Path) -> list[str]:
    """The SessionStart hook exactly as hooks/hooks.json declares it."""
    [entry] = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"]
    [hook] = entry["hooks"]
    argv = [hook["command"], *hook["args"]]
    argv = [a.replace("${CLAUDE_PLUGIN_ROOT}", str(REPO)) for a in argv]
    assert argv[0] == "python3" and argv[1] == "-I"
    return [sys.executable, *argv[1:], "--data", str(data), "--root", str(REPO), "--foreground"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_bootstrap_and_hook_run_nothing_planted_and_create_only_private_files(
    tmp_path: Path, project: tuple[Path, Path], wheel: Path  # noqa: F811 - the fixture
) -> None:
    folder, markers = project
    data = tmp_path / "plugin-data"
    env = hostile_env(bootstrap_env(wheel), folder)
    built = subprocess.run(
        session_start_command(data), cwd=folder, env=env, capture_output=True, text=True, timeout=SAFETY_TIMEOUT
    )
    assert (built.returncode, built.stdout, built.stderr) == (0, "", "")
    log = (data / "bootstrap.log").read_text()
    assert "ready: version" in log, log
    assert str(CONSTRAINTS) in log  # pinned install
    pip_version = tuple(int(n) for n in re.findall(r"\d+", distribution("pip").version)[:2])
    if pip_version >= (22, 3):
        assert "--without-pip" in log and "--python" in log  # one pip, no ensurepip round
    assert sorted(p.name for p in markers.iterdir()) == []

    python = data / "venv" / "bin" / "python"
    doc = {"messages": [], "pluginData": str(data)}
    answered = subprocess.run(
        [str(python), "-I", str(HOOK)],  # as hooks/mod.mjs runs it
        input=json.dumps(doc), cwd=folder, env={**env, "CLAUDE_PLUGIN_DATA": str(data)},
        capture_output=True, text=True, timeout=SAFETY_TIMEOUT,
    )
    assert (answered.returncode, answered.stderr) == (0, "")
    assert json.loads(answered.stdout)["action"] == "skip"
    assert sorted(p.name for p in markers.iterdir()) == []

    assert mode(data) == 0o700 and mode(data / "venv") == 0o700
    for file in ("bootstrap.log", "bootstrap.lock", "hook.log", "decisions.sqlite", "venv/.fast-jev-ready"):
        assert mode(data / file) == 0o600, file


def test_the_hook_from_a_source_checkout_finds_src_but_never_the_cwd(project: tuple[Path, Path], tmp_path: Path) -> None:
    # A venv whose site-packages names pydantic only: the package can only come from the
    # checkout's src/ (or, wrongly, from the planted fast_jev_compaction/ in the cwd).
    import sysconfig
    import venv

    from fast_jev_compaction.commands.spawned import link_validation_packages

    folder, markers = project
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(tmp_path / "venv")
    python = tmp_path / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(tmp_path / "venv"), "platbase": str(tmp_path / "venv")}))
    validation = link_validation_packages(tmp_path / "validation-only")
    (purelib / "validation.pth").write_text(f"{validation}\n", encoding="utf-8")
    proc = subprocess.run(
        [str(python), "-I", str(HOOK)],
        input=b'{"messages": []}', cwd=folder, capture_output=True, timeout=SAFETY_TIMEOUT,
        env=hostile_env({"CLAUDE_PLUGIN_DATA": str(tmp_path / "d"), "PATH": os.environ["PATH"]}, folder),
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    # The checkout's package answered (it needs nothing beside pydantic for that).
    assert json.loads(proc.stdout) == {"action": "skip", "reason": "nothing to compact", "log": []}
    assert sorted(p.name for p in markers.iterdir()) == []


# --------------------------------------------------------------------------- pinned versions


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line)
        assert match, f"not an exact pin: {line!r}"
        found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def project_dependencies() -> list[Requirement]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    return [Requirement(text) for text in data["project"]["dependencies"]]


def test_constraints_pin_every_direct_dependency_inside_pyprojects_ranges() -> None:
    pinned = pins()
    for requirement in project_dependencies():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not pinned in hooks/constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (name, pinned[name], str(requirement))


def test_constraints_cover_the_whole_resolved_closure() -> None:
    """Every distribution the dependencies pull in (for this interpreter) is pinned, and every
    pin satisfies what its dependents ask for."""
    pinned = pins()
    todo = list(project_dependencies())
    seen: set[str] = set()
    unwalked: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} (needed as {requirement}) is not pinned in hooks/constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (str(requirement), pinned[name])
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            pytest.fail(f"{name} is not installed here; install the package to check its closure")
        if dist.version != pinned[name]:
            unwalked.add(name)
            continue  # another version installed here: its requirements say nothing about the pin's
        for text in dist.requires or []:
            child = Requirement(text)
            if child.marker is None or child.marker.evaluate({"extra": ""}):
                todo.append(child)
    if unwalked:
        # What those pins pull in cannot be read here; the ones walked must still be pinned.
        assert seen <= set(pinned)
    else:
        assert seen == set(pinned), f"pinned but not needed: {sorted(set(pinned) - seen)}"
