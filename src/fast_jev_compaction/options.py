"""Every option, declared once, and the compaction options the core reads (upstream §6.1).

``OPTIONS`` is the single table: each record gives the option's name, its CLI flag, its
camelCase plugin key, its type, default, bounds and help, and where it applies. ``VALUES`` is
the pydantic model made from it (each option's type and bounds as a field), which every value
goes through, from a flag or a plugin setting alike. The CLI flags
(``commands/compact.py``), the hook's reading of the plugin options (``hook/config.py``),
``plugin.json``'s ``userConfig`` and the README's two option tables are built from it or checked
against it (``tests/test_option_table.py``).

Two policies read the same table: the CLI is strict (a bad value is an error naming the flag),
the hook is forgiving (a missing, mistyped or out-of-range plugin value takes the default, so a
hand-edited setting never costs the user a compaction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping

from pydantic import BeforeValidator, ConfigDict, Field, Strict, StrictBool, StrictStr, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

Kind = Literal["number", "integer", "string", "choice", "flag"]
# core: a CompactOptions field; cli: a `fast-jev compact` flag; hook: read by the Python hook;
# mod: read by the JavaScript mod (hooks/mod.mjs) only.
Where = Literal["core", "cli", "hook", "mod"]

JEV_DEFAULT_MODEL = "jev-latest"

# A test run with failures may keep this many times the budget: at the default 800 characters,
# 3,200, enough for the id, assertion, values and place of some ten failures (a failure's take
# is 150 to 300 characters); past that the archive has them. Bounded by the budget, so a
# smaller digestChars shrinks it too, and under the rules' LOG_CAP (16,000): a capped log still
# frees four fifths of itself.
FAILURES_FACTOR = 4
# ``--log`` without a path: the user-level decision log.
DEFAULT_LOG = "default"

# Where a judge key may come from, per provider, in order. Only the chosen provider's variables
# are read: a key set for another tool never switches the judge on by itself.
KEY_ENV_VARS: Mapping[str, tuple[str, ...]] = {
    "systemone": ("TYPESAFE_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY", "TYPESAFE_API_KEY"),
    "cloudflare": ("CLOUDFLARE_API_TOKEN",),
}


class OptionValueError(ValueError):
    """A value outside an option's type or bounds; ``option`` names it for the message."""

    def __init__(self, option: "Option", value: Any, why: str) -> None:
        self.option = option
        self.value = value
        self.why = why
        super().__init__(f"{option.name}: {why}")


@dataclass(frozen=True)
class Option:
    name: str
    kind: Kind
    default: Any
    help: str
    where: frozenset[Where]
    flag: str | None = None
    short: str | None = None
    key: str | None = None
    title: str = ""
    minimum: float | None = None
    maximum: float | None = None
    # An exclusive lower bound (a timeout must be above 0, and 0 itself is not a timeout).
    above: float | None = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    sensitive: bool = False
    # A flag that may stand alone: ``--log`` means ``--log <const>``.
    const: str | None = None
    # How the default reads in help and tables when the literal value says little.
    shown_default: str | None = None

    @property
    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.kind == "flag":
            return "off"
        if self.kind in ("number", "integer"):
            return _num(self.default)
        return str(self.default)

    @property
    def bounds_text(self) -> str:
        low = f"> {_num(self.above)}" if self.above is not None else (
            f">= {_num(self.minimum)}" if self.minimum is not None else ""
        )
        if self.maximum is not None:
            if self.minimum is not None:
                return f"in [{_num(self.minimum)}, {_num(self.maximum)}]"
            return f"{low} and <= {_num(self.maximum)}" if low else f"<= {_num(self.maximum)}"
        return low

    @property
    def annotation(self) -> Any:
        """The option's type and bounds as a pydantic annotation: the field of :data:`VALUES`."""
        if self.kind == "flag":
            return StrictBool
        if self.kind in ("string", "choice"):
            return Literal[self.choices] if self.choices else StrictStr
        bounds = Field(ge=self.minimum, le=self.maximum, gt=self.above, allow_inf_nan=False)
        if self.kind == "integer":
            return Annotated[int, Strict(), BeforeValidator(_whole), bounds]
        return Annotated[float, Strict(), bounds]

    def check(self, value: Any) -> Any:
        """``value`` if it is of this option's type and within its bounds (:data:`VALUES` says),
        else ``OptionValueError``."""
        try:
            return VALUES.validate_python({self.name: value})[self.name]
        except ValidationError as exc:
            raise OptionValueError(self, value, self.why(exc.errors()[0]["type"], value)) from None

    def why(self, problem: str, value: Any) -> str:
        """What a pydantic error of type ``problem`` means for this option, said the CLI's way."""
        if problem == "literal_error":
            return f"expected one of {', '.join(self.choices)}, got {value!r}"
        if problem == "string_type":
            return f"expected text, got {value!r}"
        if problem == "bool_type":
            return f"expected true or false, got {value!r}"
        if problem in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            return f"expected a number {self.bounds_text}, got {_num(value)}"
        if self.kind == "integer" and type(value) is float and math.isfinite(value):
            return f"expected a whole number, got {value!r}"
        return f"expected a finite number, got {value!r}"

    def parse(self, text: str) -> Any:
        """A CLI value: strict, so ``nan``, ``1e400``, ``6.5`` for a count or ``-1`` are errors."""
        if self.kind in ("number", "integer"):
            try:
                value: Any = int(text) if self.kind == "integer" else float(text)
            except ValueError:
                what = "a whole number" if self.kind == "integer" else "a number"
                raise OptionValueError(self, text, f"expected {what}, got {text!r}") from None
            return self.check(value)
        return self.check(text)


def _whole(value: Any) -> Any:
    """A whole-number option takes 6.0 as 6 (JSON and the settings UI know only numbers)."""
    return int(value) if type(value) is float and value.is_integer() else value


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _where(*names: Where) -> frozenset[Where]:
    return frozenset(names)


OPTIONS: tuple[Option, ...] = (
    # The judge, and how Jev is reached.
    Option("judge", "choice", "auto", "local: the embedded offline judge; jev: the Jev API; "
           "auto: Jev when a key or an endpoint URL is configured, else the embedded judge",
           _where("cli", "hook"), flag="--judge", key="judge", title="Judge", choices=("auto", "local", "jev")),
    Option("provider", "choice", "auto", "the Jev provider; auto: System One (OpenRouter for an sk-or- key); "
           "openrouter and cloudflare read their own key variables only when chosen",
           _where("cli", "hook"), flag="--provider", key="provider", title="Jev provider",
           choices=("auto", "systemone", "openrouter", "cloudflare")),
    Option("api_key", "string", "", "the Jev key; empty: $TYPESAFE_API_KEY, or the chosen provider's variable",
           _where("cli", "hook"), flag="--api-key", key="apiKey", title="Jev API key", metavar="KEY",
           sensitive=True, shown_default="$TYPESAFE_API_KEY"),
    Option("model", "string", JEV_DEFAULT_MODEL, "the Jev model", _where("cli", "hook"),
           flag="--model", key="model", title="Jev model", metavar="NAME"),
    Option("base_url", "string", "", "the Jev endpoint URL, e.g. the one `fast-jev serve` prints; "
           "a key is never sent over plain http to another machine",
           _where("cli", "hook"), flag="--jev-url", key="baseUrl", title="Jev endpoint URL", metavar="URL",
           shown_default="System One"),
    Option("jev_timeout_seconds", "number", 15.0, "deadline per judge request, body read included",
           _where("cli", "hook"), flag="--timeout", key="jevTimeoutSeconds", title="Jev request time limit (seconds)",
           minimum=0.1, maximum=300, metavar="SECONDS"),
    # The goal the judge reads.
    Option("goal", "string", "", "what the session works towards, as the judge reads it",
           _where("core", "cli", "hook"), flag="--goal", key="goal", title="Goal", metavar="TEXT",
           shown_default="the last 3 prompts"),
    Option("instructions", "string", "", "extra focus added to the goal, as `/compact <instructions>` gives",
           _where("cli"), flag="--instructions", metavar="TEXT", shown_default="none"),
    # What a pass keeps, cuts and asks.
    Option("policy", "choice", "budget", "budget: truncate the outputs the judge values least until "
           "targetReduction of them is freed; threshold: keep, truncate or drop each call by keepThreshold",
           _where("core", "cli", "hook"), flag="--policy", key="policy", title="Decision policy",
           choices=("budget", "threshold")),
    Option("window_tokens", "integer", 0, "the model's context window (tokens): a pass frees what brings the "
           "context under --target-percent of it, least valuable first (0: unknown; the budget then frees "
           "--target-reduction of the judged outputs)",
           _where("core", "cli"), flag="--window", metavar="TOKENS", minimum=0, shown_default="unknown"),
    Option("target_percent", "number", 40.0, "a pass aims to bring the context under this share of the window "
           "(percent); the plugin's own trigger skips when the context is already under it",
           _where("core", "cli", "hook"), flag="--target-percent", key="targetPercent", title="Target percentage",
           minimum=1, maximum=100, metavar="PERCENT"),
    Option("target_reduction", "number", 0.9, "budget policy without a window: the share of the judged outputs' characters to free",
           _where("core", "cli", "hook"), flag="--target-reduction", key="targetReduction",
           title="Target reduction", minimum=0, maximum=1, metavar="SHARE"),
    Option("keep_floor", "number", 1.0, "budget policy: an output the judge values at this or more is never cut "
           "(1: no floor)",
           _where("core", "cli", "hook"), flag="--keep-floor", key="keepFloor", title="Keep floor",
           minimum=0, maximum=1, metavar="P"),
    Option("keep_threshold", "number", 0.5, "threshold policy: keep when a probability reaches it",
           _where("core", "cli", "hook"), flag="--keep-threshold", key="keepThreshold", title="Keep threshold",
           minimum=0, maximum=1, metavar="P"),
    Option("preserve_recent_messages", "integer", 6, "the last N messages (and the first) are never touched",
           _where("core", "cli", "hook"), flag="--preserve-recent", key="preserveRecentMessages",
           title="Recent messages kept", minimum=0, metavar="N"),
    Option("max_state_tokens", "integer", 25_000, "token budget for the state the judge reads",
           _where("core", "cli", "hook"), flag="--max-state-tokens", key="maxStateTokens",
           title="State budget (tokens)", minimum=1, metavar="N"),
    # Kept under Jev's 32k-token context.
    Option("max_request_tokens", "integer", 30_000, "token budget for one judge request, state and questions",
           _where("core", "cli", "hook"), flag="--max-request-tokens", key="maxRequestTokens",
           title="Request budget (tokens)", minimum=1, metavar="N"),
    # What a later turn needs from a long output is mostly its names (kept by the digest's line of
    # ids) or lines from anywhere in it (code an edit quotes), which no fixed opening or closing
    # holds: on the corpus, 800-char digests lose as much as 1,600-char ones (docs/quality.md).
    Option("truncate_head_chars", "integer", 250, "characters of its opening a truncated output keeps",
           _where("core", "cli", "hook"), flag="--truncate-head-chars", key="truncateHeadChars",
           title="Truncated output opening (chars)", minimum=0, metavar="N"),
    Option("digest_chars", "integer", 800, "characters a truncated output keeps in all: its opening, "
           "its closing, its key lines (errors, summaries) and a line of the ids and paths left out; "
           f"a failing test run up to {FAILURES_FACTOR} times as many, for its failures",
           _where("core", "cli", "hook"), flag="--digest-chars", key="digestChars",
           title="Truncated output digest (chars)", minimum=0, metavar="N"),
    Option("max_concurrent_requests", "integer", 4, "judge requests in flight at once",
           _where("core", "cli", "hook"), flag="--max-concurrent-requests", key="maxConcurrentRequests",
           title="Concurrent judge requests", minimum=1, metavar="N"),
    # When the plugin compacts, and its Python side.
    Option("compact_at_percent", "number", 60.0, "after a turn, compact once the context window is this full (percent)",
           _where("hook", "mod"), key="compactAtPercent", title="Compaction percentage", minimum=1, maximum=100),
    Option("min_freed_percent", "number", 5.0, "a compaction that misses its target (targetPercent, or Claude "
           "Code's own threshold once the window is full) still replaces when it frees this many points of the "
           "window; otherwise the built-in summary runs",
           _where("hook"), key="minFreedPercent", title="Minimum freed (points)", minimum=0, maximum=100),
    Option("min_reduction_ratio", "number", 0.0, "above 0: any compaction that shrinks the history by less than "
           "this share (0-1) runs the built-in summary instead, as before the window gate; 0: the window gate decides",
           _where("hook"), key="minReductionRatio", title="Minimum reduction", minimum=0, maximum=1),
    Option("timeout_seconds", "number", 120.0, "how long the Python side may take before the built-in summary runs",
           _where("hook", "mod"), key="timeoutSeconds", title="Compaction time limit (seconds)", minimum=1, maximum=600),
    Option("python", "string", "", "an interpreter with fast-jev-compaction installed; empty: the environment "
           "the plugin prepares in its data folder (or $FAST_JEV_PYTHON)",
           _where("mod"), key="python", title="Python interpreter", shown_default="prepared venv"),
    # What the CLI writes.
    Option("out", "string", "", "write the compacted messages here (never onto the input)",
           _where("cli"), flag="--out", short="-o", metavar="FILE", shown_default="stdout"),
    Option("format", "choice", "json", "json: one list of messages; jsonl: one per line; "
           "transcript: a Claude Code session file that `claude --resume` loads (what no pass changed comes back "
           "as the input wrote it, block for block, a result's record's `toolUseResult` included; a cut result, "
           "or one whose call's input went to the archive, without the `toolUseResult`)",
           _where("cli"), flag="--format", choices=("json", "jsonl", "transcript")),
    Option("json", "flag", False, "print the summary as one JSON document instead of a line",
           _where("cli"), flag="--json"),
    Option("decisions", "flag", False, "print a table of the decided calls to stderr",
           _where("cli"), flag="--decisions"),
    Option("archive", "string", "", "save every cut output here, content-addressed; markers name the files",
           _where("cli"), flag="--archive", metavar="DIR", shown_default="FILE.archive beside --out"),
    Option("no_archive", "flag", False, "save nothing; markers then say to re-run the tool",
           _where("cli"), flag="--no-archive"),
    Option("log", "string", "", "record the compaction in the decision log `fast-jev log` reads "
           "(`fast-jev log path` prints it), or in PATH",
           _where("cli"), flag="--log", metavar="PATH", const=DEFAULT_LOG, shown_default="not recorded"),
)

OPTION = {option.name: option for option in OPTIONS}


def _values_model() -> Any:
    """Every option's value by name, none required: the one pydantic model of the table, which
    ``Option.check`` (the CLI's flags, the hook's plugin options) validates with."""
    fields = {option.name: NotRequired[option.annotation] for option in OPTIONS}
    return with_config(ConfigDict(extra="forbid"))(TypedDict("OptionValues", fields))  # type: ignore[operator]


VALUES: TypeAdapter[dict[str, Any]] = TypeAdapter(_values_model())


DEFAULT_KEEP_THRESHOLD: float = OPTION["keep_threshold"].default
DEFAULT_PRESERVE_RECENT_MESSAGES: int = OPTION["preserve_recent_messages"].default
DEFAULT_MAX_STATE_TOKENS: int = OPTION["max_state_tokens"].default
DEFAULT_MAX_REQUEST_TOKENS: int = OPTION["max_request_tokens"].default
DEFAULT_TRUNCATE_HEAD_CHARS: int = OPTION["truncate_head_chars"].default
DEFAULT_MAX_CONCURRENT_REQUESTS: int = OPTION["max_concurrent_requests"].default
DEFAULT_DIGEST_CHARS: int = OPTION["digest_chars"].default
DEFAULT_TARGET_REDUCTION: float = OPTION["target_reduction"].default
DEFAULT_KEEP_FLOOR: float = OPTION["keep_floor"].default
DEFAULT_TARGET_PERCENT: float = OPTION["target_percent"].default
POLICIES: tuple[str, ...] = OPTION["policy"].choices


def plugin_user_config() -> dict[str, dict[str, Any]]:
    """``plugin.json``'s ``userConfig``, as the table declares it."""
    config: dict[str, dict[str, Any]] = {}
    for option in OPTIONS:
        if option.key is None:
            continue
        entry: dict[str, Any] = {
            "type": "number" if option.kind in ("number", "integer") else "string",
            "title": option.title,
            "description": option.help[0].upper() + option.help[1:] + ".",
        }
        if option.choices:
            entry["options"] = list(option.choices)
        if option.sensitive:
            entry["sensitive"] = True
        else:
            entry["default"] = _plain(option.default)
        if option.minimum is not None:
            entry["min"] = _plain(option.minimum)
        if option.maximum is not None:
            entry["max"] = _plain(option.maximum)
        config[option.key] = entry
    return config


def _plain(value: Any) -> Any:
    """15.0 as 15, as a JSON settings file would say it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(audience: Literal["plugin", "cli"]) -> str:
    """The README's option table for the plugin settings or for ``fast-jev compact``."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for option in OPTIONS:
        if audience == "plugin":
            if option.key is None:
                continue
            name = f"`{option.key}`"
        else:
            if "cli" not in option.where or option.flag is None:
                continue
            value = "|".join(option.choices) if option.choices else option.metavar
            flag = f"{option.short}, {option.flag}" if option.short else option.flag
            name = f"`{flag}`" if option.kind == "flag" else f"`{flag} {value}`"
        default = f"`{option.default_text}`" if option.shown_default is None and option.default != "" else (
            option.shown_default or ""
        )
        meaning = option.help
        if option.bounds_text and option.kind in ("number", "integer"):
            meaning += f"; {option.bounds_text}"
        rows.append(f"| {_cell(name)} | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(rows) + "\n"


def read_plugin_options(raw: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """The hook's policy: every Python-side plugin option by name, and a note per value ignored.

    Text is stripped and empty text means the default; a whole-number option floors a fraction
    (the settings UI only knows "number"); anything else invalid takes the default.
    """
    source: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    values: dict[str, Any] = {}
    notes: list[str] = []
    for option in OPTIONS:
        if option.key is None or "hook" not in option.where:
            continue
        value = source.get(option.key)
        values[option.name] = option.default
        if value is None:
            continue
        if isinstance(value, str) and option.kind in ("string", "choice"):
            value = value.strip()
            if not value:
                continue
        elif option.kind == "integer" and isinstance(value, float) and math.isfinite(value):
            value = math.floor(value)
        try:
            values[option.name] = option.check(value)
        except OptionValueError as exc:
            # A secret is never echoed, not even a mistyped one.
            shown, why = ("(hidden)", exc.why.split(", got")[0]) if option.sensitive else (repr(value), exc.why)
            notes.append(f"option {option.key}={shown} ignored ({why}); using {option.default_text}")
    return values, notes


@dataclass(frozen=True)
class CompactOptions:
    """Resolved options; build them with :func:`resolve_options` to apply the rules."""

    goal: str = ""
    keep_threshold: float = DEFAULT_KEEP_THRESHOLD
    preserve_recent_messages: int = DEFAULT_PRESERVE_RECENT_MESSAGES
    max_state_tokens: float = DEFAULT_MAX_STATE_TOKENS
    max_request_tokens: float = DEFAULT_MAX_REQUEST_TOKENS
    truncate_head_chars: int = DEFAULT_TRUNCATE_HEAD_CHARS
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS
    digest_chars: int = DEFAULT_DIGEST_CHARS
    policy: str = "budget"
    target_reduction: float = DEFAULT_TARGET_REDUCTION
    keep_floor: float = DEFAULT_KEEP_FLOOR
    # Where cut outputs are saved (content-addressed); None: nothing is saved.
    archive_dir: str | None = None
    # The deterministic rules (rules.py) settle what they can before the judge is asked.
    use_rules: bool = True
    # The model's window and the share of it a pass aims under (policy.chars_to_free); 0: unknown.
    window_tokens: int = 0
    target_percent: float = DEFAULT_TARGET_PERCENT
    # The engine's own count of the whole context (system prompt and tools included); 0: estimated
    # from the messages' characters.
    context_tokens: int = 0


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def validate_threshold(value: float) -> float:
    """Thresholds live in [0, 1]; anything else is a caller error, not a silent clamp."""
    if not 0 <= value <= 1:
        raise ValueError("keepThreshold must be between 0 and 1")
    return value


def resolve_options(
    *,
    goal: str | None = None,
    keep_threshold: Any = None,
    preserve_recent_messages: Any = None,
    max_state_tokens: Any = None,
    max_request_tokens: Any = None,
    truncate_head_chars: Any = None,
    max_concurrent_requests: Any = None,
    digest_chars: Any = None,
    policy: str | None = None,
    target_reduction: Any = None,
    keep_floor: Any = None,
    archive_dir: str | None = None,
    use_rules: bool = True,
    window_tokens: Any = None,
    target_percent: Any = None,
    context_tokens: Any = None,
) -> CompactOptions:
    """Upstream's library rules: non-finite values fall back, counts are floored and clamped.

    The CLI and the hook validate against ``OPTIONS`` first; this stays lenient for library callers.
    """
    threshold = _finite(keep_threshold)
    threshold = DEFAULT_KEEP_THRESHOLD if threshold is None else validate_threshold(threshold)

    def floored(value: Any, default: int, minimum: int) -> int:
        number = _finite(value)
        return default if number is None else max(minimum, math.floor(number))

    def at_least_one(value: Any, default: float) -> float:
        number = _finite(value)
        return default if number is None else max(1.0, number)

    return CompactOptions(
        goal=goal or "",
        keep_threshold=threshold,
        preserve_recent_messages=floored(preserve_recent_messages, DEFAULT_PRESERVE_RECENT_MESSAGES, 0),
        max_state_tokens=at_least_one(max_state_tokens, DEFAULT_MAX_STATE_TOKENS),
        max_request_tokens=at_least_one(max_request_tokens, DEFAULT_MAX_REQUEST_TOKENS),
        truncate_head_chars=floored(truncate_head_chars, DEFAULT_TRUNCATE_HEAD_CHARS, 0),
        max_concurrent_requests=floored(max_concurrent_requests, DEFAULT_MAX_CONCURRENT_REQUESTS, 1),
        digest_chars=floored(digest_chars, DEFAULT_DIGEST_CHARS, 0),
        policy=policy if policy in POLICIES else "budget",
        target_reduction=_share(target_reduction, DEFAULT_TARGET_REDUCTION),
        keep_floor=_share(keep_floor, DEFAULT_KEEP_FLOOR),
        archive_dir=archive_dir or None,
        use_rules=bool(use_rules),
        window_tokens=floored(window_tokens, 0, 0),
        target_percent=_percent(target_percent),
        context_tokens=floored(context_tokens, 0, 0),
    )


def _percent(value: Any) -> float:
    number = _finite(value)
    return DEFAULT_TARGET_PERCENT if number is None else min(100.0, max(1.0, number))


def _share(value: Any, default: float) -> float:
    number = _finite(value)
    if number is None:
        return default
    if not 0 <= number <= 1:
        raise ValueError("a share must be between 0 and 1")
    return number
