"""PEM private-key blocks, masked whole; a block cut at either end loses everything on its cut side."""

from __future__ import annotations

import re

from .mask import PEM_MASK

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")


def mask_pem(text: str) -> str:
    if "PRIVATE KEY-----" not in text:
        return text
    out: list[str] = []
    pos = 0
    # A block cut before its BEGIN (the closing lines of an output, a digest's end): everything
    # before its END may be key material.
    first_end = _PEM_END.search(text)
    if first_end is not None:
        first_begin = _PEM_BEGIN.search(text, 0, first_end.start())
        if first_begin is None:
            out.append(PEM_MASK)
            pos = first_end.end()
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        out.append(text[pos : begin.start()])
        end = _PEM_END.search(text, begin.end())
        out.append(PEM_MASK)
        if end is None:  # an unterminated block: everything after BEGIN is key material
            return "".join(out)
        pos = end.end()
    out.append(text[pos:])
    return "".join(out)
