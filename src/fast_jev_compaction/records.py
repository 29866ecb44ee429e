"""The package's dataclasses: ``record`` (mutable) and ``frozen``, made without compiling code.

Python 3.11 compiles each method a dataclass generates from source, one ``exec`` each, when the
class is made: about 0.8M instructions apiece, three for a plain class (``__init__``,
``__repr__``, ``__eq__``), six for a frozen one (and ``__hash__``, ``__setattr__``,
``__delattr__``). The hook, a process started for one compaction, made some forty classes at
import: over a third of its start went to compiling methods it mostly never calls.

Here only ``__init__`` is generated. Equality, hash and repr follow the dataclass's own rules
(the fields that ``compare``, ``hash`` and ``repr`` select, in order; a method the class writes
itself is kept; a mutable record is unhashable, as a dataclass with ``eq`` is), made from the
field names without compiling, so instances compare, hash and print as before. A frozen class
is frozen for mypy (``dataclass_transform(frozen_default=True)``: assigning to a field is a type
error, and ``tests/test_lint.py`` runs mypy), not by a ``__setattr__`` that would also route
every ``__init__`` through ``object.__setattr__``. Everything else is a dataclass's:
``dataclasses.fields``, ``replace``, ``asdict``, ``field(...)``, slots.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, slots: bool = False, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform()
def record(cls: Any = None, /, *, slots: bool = False, kw_only: bool = False) -> Any:
    """``@dataclass(...)``; see the module's docstring."""

    def make(cls: Any) -> Any:
        return _made(cls, slots=slots, kw_only=kw_only, repr=True, hashed=False)

    return make if cls is None else make(cls)


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, slots: bool = False, kw_only: bool = False, repr: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True)
def frozen(cls: Any = None, /, *, slots: bool = False, kw_only: bool = False, repr: bool = True) -> Any:  # noqa: A002 - dataclass's own name
    """``@dataclass(frozen=True, ...)`` as the type checker sees it; see the module's docstring."""

    def make(cls: Any) -> Any:
        return _made(cls, slots=slots, kw_only=kw_only, repr=repr, hashed=True)

    return make if cls is None else make(cls)


def _made(cls: Any, *, slots: bool, kw_only: bool, repr: bool, hashed: bool) -> Any:  # noqa: A002
    # A class that writes __eq__ alone gets __hash__ = None from Python, not from its author.
    written = {name for name, value in cls.__dict__.items() if not (name == "__hash__" and value is None and "__eq__" in cls.__dict__)}
    made = dataclasses.dataclass(slots=slots, kw_only=kw_only, repr=False, eq=False)(cls)
    fields = dataclasses.fields(made)
    methods: dict[str, Callable[..., Any] | None] = {
        "__eq__": _eq(_values([f.name for f in fields if f.compare])),
        # A mutable value's hash would change under the dict holding it: None, as a dataclass says.
        "__hash__": _hash(_values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])) if hashed else None,
    }
    if repr:
        methods["__repr__"] = _repr([f.name for f in fields if f.repr])
    for name, method in methods.items():
        if name not in written:
            setattr(made, name, method)
    return made


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
