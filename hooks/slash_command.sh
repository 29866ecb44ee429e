# The slash commands' runner (commands/*.md): `fast-jev log` or `fast-jev stats` on the plugin's
# decision log, bounded to 150 lines. Usage: sh slash_command.sh DATA_FOLDER log|stats, with the
# user's arguments on stdin. They never reach a shell's command line: Claude Code pastes them into
# the command's text, where a shell would run any $(...) or backquote in them; fast-jev splits
# them as shell words and parses them as its own options, which runs nothing.
data="$1"
py="${FAST_JEV_PYTHON:-$data/venv/bin/python}"
# A relative path would be found from the session's folder, where anyone's files may sit.
case "$py" in
    /*) ;;
    */*)
        echo "FAST_JEV_PYTHON is a relative path ($py); give an absolute path or a command name on PATH"
        exit 0 ;;
esac
if ! { [ -x "$py" ] || command -v "$py" >/dev/null 2>&1; }; then
    echo "fast-jev-compaction is still preparing its Python environment; progress is in $data/bootstrap.log"
    exit 0
fi
export FAST_JEV_DB="$data/decisions.sqlite"
case "$2" in
    log) "$py" -m fast_jev_compaction.cli log --arguments-on-stdin --max-lines 150 2>&1 ;;
    stats) "$py" -m fast_jev_compaction.cli stats --arguments-on-stdin 2>&1 | head -n 150 ;;
    *) echo "slash_command.sh: expected log or stats, got '$2'" >&2; exit 2 ;;
esac
