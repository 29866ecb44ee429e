"""A project's sessions played one after another, as one long session.

No corpus session is long enough to reach the plugin's trigger in a 200k window, and real work
often is: a user who never clears keeps one conversation across tasks for hours. A project's
sessions (Claude Code keeps one folder of them per project), in the order they were recorded,
make such a conversation out of real ones: each task's prompts, reads and edits as they came,
and later tasks re-reading what earlier ones read. The replay plays each as one session beside
the sessions alone (``replay.replay``).

A run keeps every message as it is but for the ids of calls an earlier session of the run used
already (test fixtures share ids): those take the session's place in the run as a suffix, so
each call still pairs with its own result.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import groupby
from typing import Iterable, Sequence

from ..conversation.messages import SessionMessage
from .corpus import Session, recorded_start


def project_runs(sessions: Iterable[Session]) -> list[Session]:
    """One session per project of two sessions or more: its sessions' messages in the order they
    were recorded (first record's time, then path; files without a time last), named after the
    project. Sources and projects in order."""
    by_project = sorted(sessions, key=lambda s: (s.source, s.project))
    runs: list[Session] = []
    for (source, project), grouped in groupby(by_project, key=lambda s: (s.source, s.project)):
        members = sorted(grouped, key=_recorded_order)
        if len(members) < 2:
            continue
        messages: list[SessionMessage] = []
        used: set[str] = set()
        for place, member in enumerate(members):
            messages.extend(_unique_ids(member.messages, used, f"~{place}"))
        first = members[0]
        runs.append(Session(first.path.parent, project, messages, source, project, project))
    return runs


def _recorded_order(session: Session) -> tuple[bool, str, str]:
    start = recorded_start(session.path)
    return (start is None, start or "", str(session.path))


def _unique_ids(messages: Sequence[SessionMessage], used: set[str], suffix: str) -> list[SessionMessage]:
    """``messages`` with the call ids in ``used`` suffixed; ``used`` gains the ids they end with."""
    own = {use.tool_use_id for message in messages for use in message.toolUses}
    own.update(result.tool_use_id for message in messages for result in message.toolResults or ())
    clash = own & used
    used.update(own - clash)
    used.update(f"{tool_use_id}{suffix}" for tool_use_id in clash)
    if not clash:
        return list(messages)
    return [_renamed(message, clash, suffix) for message in messages]


def _renamed(message: SessionMessage, ids: set[str], suffix: str) -> SessionMessage:
    uses = tuple(
        replace(use, tool_use_id=use.tool_use_id + suffix) if use.tool_use_id in ids else use for use in message.toolUses
    )
    results = None if message.toolResults is None else tuple(
        replace(result, tool_use_id=result.tool_use_id + suffix) if result.tool_use_id in ids else result
        for result in message.toolResults
    )
    if uses == message.toolUses and results == message.toolResults:
        return message
    return replace(message, toolUses=uses, toolResults=results)
