"""Frozen dataclasses: frozen for the type checker, plain dataclasses at run time.

Python 3.11 compiles each method a dataclass generates from source, one ``exec`` each, when the
class is made (about half a million instructions apiece). ``frozen=True`` adds two of them
(``__setattr__`` and ``__delattr__``) and makes every ``__init__`` assign through
``object.__setattr__``; the hook, a process started for one compaction, made some thirty frozen
classes at import, about a seventh of its start. Here mypy holds the promise instead
(``dataclass_transform(frozen_default=True)``: assigning to a field is a type error, and
``tests/test_lint.py`` runs mypy), and the class keeps what frozen gave it besides: equality
and a hash by value (``unsafe_hash``), so an instance still serves as a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, slots: bool = False, kw_only: bool = False, repr: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True)
def frozen(cls: Any = None, /, *, slots: bool = False, kw_only: bool = False, repr: bool = True) -> Any:  # noqa: A002 - dataclass's own name
    """``@dataclass(frozen=True, ...)`` as the type checker sees it; see the module's docstring."""
    make = dataclass(slots=slots, kw_only=kw_only, repr=repr, unsafe_hash=True)
    return make if cls is None else make(cls)
