"""The Claude Code adapter: the stdin event model, plugin options and the hook entry point."""
