"""Frozen dataclasses: frozen for the type checker, made without compiling code at run time.

Python 3.11 compiles each method a dataclass generates from source, one ``exec`` each, when the
class is made: about half a million instructions apiece, six for a frozen class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``). The hook, a process
started for one compaction, made some thirty frozen classes at import: a third of its start.

Here only ``__init__`` is generated. Immutability is held by mypy instead
(``dataclass_transform(frozen_default=True)``: assigning to a field is a type error, and
``tests/test_lint.py`` runs mypy), which also spares every ``__init__`` the detour through
``object.__setattr__``. Equality, hash and repr are the dataclass's own rules (the fields that
``compare``, ``hash`` and ``repr`` select, in order; a method the class writes itself is kept),
made from the field names with no compiling, so an instance still serves as a key and compares
and prints as before.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, slots: bool = False, kw_only: bool = False, repr: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True)
def frozen(cls: Any = None, /, *, slots: bool = False, kw_only: bool = False, repr: bool = True) -> Any:  # noqa: A002 - dataclass's own name
    """``@dataclass(frozen=True, ...)`` as the type checker sees it; see the module's docstring."""

    def make(cls: Any) -> Any:
        written = set(cls.__dict__)
        made = dataclasses.dataclass(slots=slots, kw_only=kw_only, repr=False, eq=False)(cls)
        fields = dataclasses.fields(made)
        methods: dict[str, Callable[..., Any]] = {
            "__eq__": _eq(_values([f.name for f in fields if f.compare])),
            "__hash__": _hash(_values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])),
        }
        if repr:
            methods["__repr__"] = _repr([f.name for f in fields if f.repr])
        for name, method in methods.items():
            if name not in written:
                setattr(made, name, method)
        return made

    return make if cls is None else make(cls)


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of these fields' values, as the dataclass methods compare and hash it."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _eq(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _repr(names: list[str]) -> Callable[[Any], str]:
    @recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__
