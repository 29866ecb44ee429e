"""The ``fast-jev report --html`` page: one self-contained HTML file (pure: summary in, text out).

Self-contained means it opens from disk with no network: inline CSS, no script, no font or image
fetched, and a Content-Security-Policy that forbids loading anything should a value from the log
ever look like markup. Every value from the log is escaped. Each decision is shown by colour *and*
by its word (keep / truncate / drop), and the colours differ in lightness as well as hue.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from .session import (
    KINDS,
    Compaction,
    SessionSummary,
    archive_path,
    decision_kind,
    decision_rule,
    input_archive_path,
    reason_category,
    shrink_pct,
)
from .store import DecisionRow

# Okabe-Ito blue and orange, and a neutral grey for what left the context.
KIND_COLOURS = {"keep": "#0072B2", "truncate": "#E69F00", "drop": "#5A5A5A"}
_KIND_TEXT = {"keep": "#FFFFFF", "truncate": "#1A1A1A", "drop": "#FFFFFF"}
_KIND_MEANING = {
    "keep": "call and result stay verbatim",
    "truncate": "call stays, result cut to its head",
    "drop": "call and result leave the context",
}
# The timeline strip tells the three apart by pattern too: solid, half, hatched.
_KIND_SEGMENT = {
    "keep": "{c}",
    "truncate": "linear-gradient(90deg, {c} 0 50%, #F6D58A 50% 100%)",
    "drop": "repeating-linear-gradient(45deg, {c} 0 4px, #9A9A9A 4px 8px)",
}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #F7F8FA; color: #1A1A1A;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 0 0 12px; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.meta { color: #4A4F57; margin: 0 0 20px; }
section { background: #FFFFFF; border: 1px solid #D9DDE3; border-radius: 8px; padding: 16px 18px; margin: 0 0 18px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #E6E9EE; vertical-align: top; }
th { font-weight: 600; color: #39404A; background: #F1F3F6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.totals { width: auto; min-width: 480px; }
table.totals th { width: 220px; }
.badge { display: inline-block; min-width: 64px; padding: 1px 8px; border-radius: 10px; font-weight: 600;
  font-size: 12px; text-align: center; letter-spacing: .02em; }
.badge.kind-other { background: #FFFFFF; color: #1A1A1A; border: 1px solid #5A5A5A; }
.outcome { display: inline-block; padding: 1px 8px; border-radius: 4px; font-size: 12px; font-weight: 600;
  border: 1px solid #39404A; margin-left: 6px; }
.outcome-replaced { background: #E8F1FA; }
.outcome-fallback, .outcome-skipped { background: #FFF4DC; }
.legend { display: flex; gap: 18px; flex-wrap: wrap; margin: 0; padding: 0; list-style: none; }
.legend li { display: flex; align-items: center; gap: 8px; }
.bars { display: grid; grid-template-columns: 64px 1fr; gap: 6px 10px; align-items: center; margin: 0 0 14px; }
.bar { height: 22px; border-radius: 4px; position: relative; min-width: 2px; }
.bar-before { background: #C5CED8; }
.bar-after { background: #4F6478; }
.bar-label { font-size: 12.5px; color: #39404A; }
.caption { margin: 0 0 4px; font-size: 12.5px; color: #4A4F57; }
.strip { display: flex; height: 26px; border: 1px solid #B8C0CA; border-radius: 4px; overflow: hidden; margin: 0 0 14px; }
.seg { min-width: 5px; border-right: 1px solid #FFFFFF; }
.seg.kind-other { background: #FFFFFF; }
td.target { max-width: 420px; overflow-wrap: anywhere; }
.why-judge { color: #39404A; }
.rule { font-weight: 600; }
.muted { color: #6A717B; }
.empty { font-size: 15px; padding: 10px 0; }
"""


def _kind_css() -> str:
    rules = []
    for kind, colour in KIND_COLOURS.items():
        rules.append(f".badge.kind-{kind} {{ background: {colour}; color: {_KIND_TEXT[kind]}; }}")
        rules.append(f".seg.kind-{kind} {{ background: {_KIND_SEGMENT[kind].format(c=colour)}; }}")
    return "\n".join(rules)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _n(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _badge(kind: str) -> str:
    css = kind if kind in KINDS else "other"
    return f'<span class="badge kind-{css}">{_e(kind)}</span>'


def _legend() -> str:
    items = "".join(
        f'<li>{_badge(kind)} <span class="muted">{_e(_KIND_MEANING[kind])}</span></li>' for kind in KINDS
    )
    return f'<section id="legend" aria-label="Legend"><ul class="legend">{items}</ul></section>'


def _reasons(summary: SessionSummary) -> str:
    reasons = summary.fallback_reasons()
    return "<br>".join(f"{_e(o)} ×{n:,}: {_e(r)}" for o, r, n in reasons) if reasons else "none"


def _totals(summary: SessionSummary, heading: str) -> str:
    outcomes = summary.outcomes()
    counts = summary.counts()
    before, after, freed = summary.chars()
    rows = [
        ("Compactions", f"{len(summary.compactions):,}"),
        ("Replaced", f"{outcomes['replaced']:,}"),
        ("Fallback", f"{outcomes['fallback']:,}"),
        ("Skipped", f"{outcomes['skipped']:,}"),
        ("Fallback and skip reasons", _reasons(summary)),
        ("Kept out of context", _e(summary.kept_out())),
        ("Chars before → after", f"{before:,} → {after:,} (freed {freed:,})"),
        (
            "Calls (replaced compactions)",
            " ".join(f"{_badge(k)} {counts[k]:,}" for k in KINDS),
        ),
    ]
    body = "".join(f"<tr><th scope=\"row\">{_e(h)}</th><td>{v}</td></tr>" for h, v in rows)
    return (
        f'<section class="totals"><h2>{heading}</h2>'
        f'<table class="totals"><tbody>{body}</tbody></table>'
        '<p class="muted">Sizes and call counts cover replaced compactions: a fallback or a skip '
        "leaves the conversation as it was.</p></section>"
    )


def _bars(compaction: Compaction) -> str:
    row = compaction.row
    before, after = row.chars_before, row.chars_after
    width = 100.0 if before <= 0 else max(0.0, min(100.0, after * 100.0 / before))
    smaller = shrink_pct(before, after)
    change = f", {smaller} smaller" if smaller is not None and row.outcome == "replaced" else ""
    return (
        '<div class="bars">'
        '<span class="bar-label">before</span>'
        f'<div><div class="bar bar-before" style="width:100%"></div>'
        f'<span class="bar-label">{before:,} chars · {row.messages_before:,} messages</span></div>'
        '<span class="bar-label">after</span>'
        f'<div><div class="bar bar-after" style="width:{width:.1f}%"></div>'
        f'<span class="bar-label">{after:,} chars · {row.messages_after:,} messages{_e(change)}</span></div>'
        "</div>"
    )


def _call_title(d: DecisionRow) -> str:
    size = "size not recorded" if d.result_chars is None else f"{d.result_chars:,} chars"
    return f"{d.call_id} {d.tool} {decision_kind(d.action)}, {size}"


def _strip(compaction: Compaction) -> str:
    if not compaction.decisions:
        return ""
    segments = []
    for d in compaction.decisions:
        kind = decision_kind(d.action)
        grow = max(1, d.result_chars or 0) if d.result_chars is not None else 1
        css = kind if kind in KINDS else "other"
        segments.append(
            f'<div class="seg kind-{css}" style="flex-grow:{grow}" title="{_e(_call_title(d))}"></div>'
        )
    n = compaction.counts()
    label = f"Timeline: {n['keep']} keep, {n['truncate']} truncate, {n['drop']} drop"
    return (
        '<p class="caption">Conversation order, left to right; widths follow result size.</p>'
        f'<div class="strip" role="img" aria-label="{_e(label)}">{"".join(segments)}</div>'
    )


def _why(d: DecisionRow) -> str:
    rule = decision_rule(d)
    if rule is not None:
        return f'<span class="rule">{_e(rule)}</span>'
    if d.keep_call is None and d.keep_result is None:
        return '<span class="muted">—</span>'

    def p(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    return f'<span class="why-judge">judge: call {p(d.keep_call)} · result {p(d.keep_result)}</span>'


def _archive_cell(d: DecisionRow) -> str:
    files = [(what, path) for what, path in (("output", archive_path(d)), ("input", input_archive_path(d))) if path]
    if not files:
        return '<span class="muted">—</span>'
    return "<br>".join(f'<span class="muted">{what}</span> {_archive_link(path)}' for what, path in files)


def _archive_link(path: str) -> str:
    target = Path(path)
    if not target.is_absolute():
        return f"<code>{_e(path)}</code>"
    return f'<a href="{_e(target.as_uri())}" title="{_e(path)}">{_e(target.name)}</a>'


def _calls(compaction: Compaction) -> str:
    if not compaction.decisions:
        return '<p class="muted">No per-call decisions were recorded for this compaction.</p>'
    head = (
        "<thead><tr><th>Call</th><th>Tool</th><th>Target</th><th class=\"num\">Size</th>"
        "<th>Decision</th><th>Rule or probabilities</th><th class=\"num\">Freed</th>"
        "<th>Archived</th></tr></thead>"
    )
    rows = []
    for d in compaction.decisions:
        kind = decision_kind(d.action)
        css = kind if kind in KINDS else "other"
        rows.append(
            f'<tr class="call kind-{css}" data-call="{_e(d.call_id)}" data-decision="{_e(kind)}">'
            f'<td class="mono" title="{_e(d.tool_use_id)}">{_e(d.call_id)}</td>'
            f"<td>{_e(d.tool)}</td>"
            f'<td class="target"><code>{_e(d.input_preview)}</code></td>'
            f'<td class="num">{_n(d.result_chars)}</td>'
            f"<td>{_badge(kind)}</td>"
            f"<td>{_why(d)}</td>"
            f'<td class="num">{d.chars_freed:,}</td>'
            f"<td>{_archive_cell(d)}</td></tr>"
        )
    return f'<table class="calls">{head}<tbody>{"".join(rows)}</tbody></table>'


def _compaction(compaction: Compaction) -> str:
    row = compaction.row
    agent = f" · agent <code>{_e(row.agent_id)}</code>" if row.agent_id else ""
    outcome = f'<span class="outcome outcome-{_e(row.outcome)}">{_e(row.outcome)}</span>'
    reason = ""
    if row.outcome != "replaced":
        reason = f'<p><strong>{_e(row.outcome)}:</strong> {_e(reason_category(compaction.row))}'
        if row.reason and row.reason != reason_category(compaction.row):
            reason += f' <span class="muted">({_e(row.reason)})</span>'
        reason += "</p>"
    work = (
        f'<p class="muted">trigger {_e(row.trigger or "-")} · judge {_e(row.judge or "-")} · '
        f"stage {_e(row.stage or '-')} · {row.requests:,} request(s), {row.retries:,} retries, "
        f"{row.failed_batches:,} failed batch(es) · {row.duration_ms:,} ms</p>"
    )
    return (
        f'<section class="compaction" id="compaction-{_e(row.id)}" data-outcome="{_e(row.outcome)}">'
        f"<h2>Compaction #{_e(row.id)} · {_e(row.created_at)}{agent}{outcome}</h2>"
        f"{reason}{work}{_bars(compaction)}{_strip(compaction)}{_calls(compaction)}</section>"
    )


def _overview(sessions: Sequence[SessionSummary]) -> str:
    """One row per session, linking to its part of the page."""
    rows = []
    for index, summary in enumerate(sessions):
        numbers = (len(summary.compactions), *summary.outcomes().values())
        rows.append(
            f'<tr class="session-row" data-session="{_e(summary.session_id)}">'
            f'<td><a href="#session-{index}"><code>{_e(summary.session_id)}</code></a></td>'
            + "".join(f'<td class="num">{n:,}</td>' for n in numbers)
            + f'<td class="num">{_e(summary.kept_out_pct() or "—")}</td><td>{_reasons(summary)}</td></tr>'
        )
    head = "<th>Session</th>" + "".join(
        f'<th class="num">{h}</th>' for h in ("Compactions", "Replaced", "Fallback", "Skipped", "Kept out")
    ) + "<th>Fallback and skip reasons</th>"
    return (
        f'<section id="sessions"><h2>Sessions, newest first</h2><table class="sessions">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _session(summary: SessionSummary, index: int, several: bool) -> str:
    heading = f"Session {_e(summary.session_id)}" if several else "Session totals"
    return (
        f'<div class="session" id="session-{index}" data-session="{_e(summary.session_id)}">'
        f"{_totals(summary, heading)}{''.join(_compaction(c) for c in summary.compactions)}</div>"
    )


def render_page(sessions: Sequence[SessionSummary], source: str) -> str:
    """The whole page; ``sessions`` newest first (none is the empty state); ``source`` names the
    decision log they were read from."""
    several = len(sessions) > 1
    if not sessions:
        title = "fast-jev compaction report"
        subtitle = f"decision log <code>{_e(source)}</code>"
        body = (
            '<section class="totals"><h2>Session totals</h2>'
            '<p class="empty" id="empty-state">No compactions recorded yet: the report fills in after '
            "the first compaction.</p></section>"
        )
    elif several:
        title = f"fast-jev compaction report: {len(sessions):,} sessions"
        subtitle = f"{len(sessions):,} sessions · decision log <code>{_e(source)}</code>"
        body = _overview(sessions) + _legend() + "".join(_session(s, i, True) for i, s in enumerate(sessions))
    else:
        [summary] = sessions
        title = f"fast-jev compaction report: session {summary.session_id}"
        subtitle = f"session <code>{_e(summary.session_id)}</code> · decision log <code>{_e(source)}</code>"
        body = _legend() + _session(summary, 0, False)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}{_kind_css()}</style></head>"
        f'<body><main><header><h1>Compaction report</h1><p class="meta">{subtitle}</p></header>'
        f"{body}</main></body></html>\n"
    )
