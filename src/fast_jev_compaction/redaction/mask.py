"""What a secret becomes: the masks, and a quoted value's mask that keeps its quotes."""

from __future__ import annotations

MASK = "***"
PEM_MASK = "[private key redacted]"


def quoted_mask(value: str) -> str:
    # Keep the quotes so the surrounding command or document still reads as one.
    if value[:1] in ("'", '"'):
        return f"{value[0]}{MASK}{value[0] if value[-1:] == value[0] and len(value) > 1 else ''}"
    return MASK
