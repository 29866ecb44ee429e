"""The package's dataclasses: ``record`` (mutable) and ``frozen``, made without compiling code.

Python 3.11 compiles each method a dataclass generates from source, one ``exec`` each, when the
class is made: about 0.8M instructions apiece, three for a plain class (``__init__``,
``__repr__``, ``__eq__``), six for a frozen one (and ``__hash__``, ``__setattr__``,
``__delattr__``). The hook, a process started for one compaction, made some forty classes at
import: over a third of its start went to compiling methods it mostly never calls.

Here only ``__init__`` is compiled, from a shorter source than a dataclass's (``_init``).
Equality, hash and repr follow the dataclass's own rules (the fields that ``compare``, ``hash``
and ``repr`` select, in order; a method the class writes itself is kept; a mutable record is
unhashable, as a dataclass with ``eq`` is), made from the field names without compiling, so
instances compare, hash and print as before. A frozen class
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
    # A dataclass writes a docstring for a class without one from inspect.signature, and inspect
    # (with ast, dis and tokenize) is the heaviest module the hook would load for nothing else:
    # the docstring is written here, from the field names.
    docless = not cls.__doc__
    if docless:
        cls.__doc__ = cls.__name__
    made = dataclasses.dataclass(init=False, slots=slots, kw_only=kw_only, repr=False, eq=False)(cls)
    fields = dataclasses.fields(made)
    if docless:
        made.__doc__ = f"{made.__name__}({', '.join(f.name for f in fields if f.init)})"
    if "__init__" not in cls.__dict__:
        made.__init__ = _init(made, fields, slots=slots)
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


# The default of a parameter whose field has a default_factory, as in a dataclass: the factory is
# called instead.
_FACTORY = object()
# The names the generated __init__ looks up besides its parameters; no field may take them.
_RESERVED = "_records_"


def _init(made: Any, fields: tuple[dataclasses.Field[Any], ...], *, slots: bool) -> Callable[..., None]:
    """The ``__init__`` a dataclass writes for these fields, compiled from a shorter source.

    A dataclass's own annotates every parameter and reads its defaults from a namespace built
    field by field; making and compiling it was two thirds of what a record costs to make, paid
    by every process for every class it imports. This one takes the same parameters in the same
    order (positional fields, then the keyword-only ones) with the same defaults, sets the fields
    as the dataclass's does (a ``default_factory`` called when its parameter is left out, a
    field outside ``__init__`` set only from its factory, or from its default in a slotted
    class), then calls ``__post_init__`` if the class has one. ``InitVar`` is not supported.
    """
    if any(isinstance(f.type, dataclasses.InitVar) or "InitVar" in str(f.type) for f in made.__dataclass_fields__.values()):
        raise TypeError(f"{made.__qualname__}: records take no InitVar")
    self_name = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    namespace: dict[str, Any] = {f"{_RESERVED}factory": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    default_seen = False
    for i, f in enumerate(fields):
        name = f.name
        if name.startswith(_RESERVED):
            raise TypeError(f"{made.__qualname__}: a field's name may not start with {_RESERVED!r}")
        has_default = f.default is not dataclasses.MISSING
        held = f"{_RESERVED}{i}"  # the name its default or factory is looked up by
        if f.default_factory is not dataclasses.MISSING:
            namespace[held] = f.default_factory
            value = f"{held}() if {name} is {_RESERVED}factory else {name}" if f.init else f"{held}()"
            param = f"{name}={_RESERVED}factory"
        elif has_default:
            namespace[held] = f.default
            value = name if f.init else (held if slots else "")
            param = f"{name}={held}"
        else:
            value = name if f.init else ""
            param = name
        if value:
            body.append(f"{self_name}.{name} = {value}")
        if not f.init:
            continue
        if f.kw_only:
            keyword.append(param)
            continue
        if not (has_default or f.default_factory is not dataclasses.MISSING):
            if default_seen:
                raise TypeError(f"non-default argument {name!r} follows default argument")
        else:
            default_seen = True
        positional.append(param)
    if hasattr(made, "__post_init__"):
        body.append(f"{self_name}.__post_init__()")
    params = ", ".join([self_name, *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n    " + ("\n    ".join(body) or "pass") + "\n"
    exec(source, namespace)  # noqa: S102 - the source is made above from the fields' names alone
    init: Any = namespace["__init__"]
    init.__qualname__ = f"{made.__qualname__}.__init__"
    return init
