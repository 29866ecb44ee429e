"""``record`` and ``frozen``: the equality, hash and repr of ``@dataclass`` and ``@dataclass(frozen=True)``,
with no code compiled."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fast_jev_compaction.records import frozen, record


@dataclass(frozen=True)
class Reference:
    name: str
    size: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    weight: float = field(default=0.0, hash=False)


@frozen
class Made:
    name: str
    size: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    weight: float = field(default=0.0, hash=False)


@record
class Mutable:
    name: str
    size: int = 0
    note: str = field(default="", compare=False)
    items: list[int] = field(default_factory=list)


@dataclass
class MutableReference:
    name: str
    size: int = 0
    note: str = field(default="", compare=False)
    items: list[int] = field(default_factory=list)


@record
class WritesEq:
    value: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WritesEq)


@frozen
class FrozenWritesEq:
    value: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenWritesEq)


@frozen(slots=True)
class One:
    only: Any


@frozen(repr=False)
class Written:
    value: int

    def __repr__(self) -> str:
        return "written by hand"

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 7


def _pairs() -> list[dict[str, Any]]:
    return [
        {"name": "a"},
        {"name": "a", "size": 2, "tags": ("x", "y")},
        {"name": "a", "note": "other note"},
        {"name": "a", "secret": "s3cr3t"},
        {"name": "a", "weight": 0.5},
        {"name": "b", "tags": ("x",)},
    ]


def test_equality_hash_and_repr_follow_the_dataclass_rules() -> None:
    for left in _pairs():
        for right in _pairs():
            assert (Made(**left) == Made(**right)) == (Reference(**left) == Reference(**right))
            if Reference(**left) == Reference(**right):
                assert hash(Made(**left)) == hash(Made(**right))
        assert repr(Made(**left)).replace("Made", "Reference", 1) == repr(Reference(**left))
    # Another class with the same values is not equal, as with a dataclass.
    assert Made("a") != Reference("a") and Made("a") != ("a", 0, (), "", "", 0.0)
    assert {Made("a", note="x"): 1}[Made("a", note="y")] == 1


def test_one_field_and_no_field_compare_as_tuples_would() -> None:
    nan = float("nan")
    assert One(nan) == One(nan)  # the same object inside: equal, as a tuple of it is
    assert One(1) == One(1.0) and hash(One(1)) == hash(One(1.0)) and One(1) != One(2)
    assert repr(One([1])) == "One(only=[1])"
    assert not hasattr(One(1), "__dict__")  # slots stay slots


def test_what_the_class_writes_itself_is_kept() -> None:
    assert repr(Written(1)) == "written by hand" and Written(1) == Written(2) and hash(Written(3)) == 7


def test_it_stays_a_dataclass() -> None:
    made = Made("a", 2)
    assert dataclasses.is_dataclass(made)
    assert replace(made, size=3) == Made("a", 3)
    assert dataclasses.astuple(made) == ("a", 2, (), "", "", 0.0)
    assert [f.name for f in dataclasses.fields(made)] == ["name", "size", "tags", "note", "secret", "weight"]


def test_a_recursive_value_prints_without_recursing() -> None:
    box: list[Any] = []
    one = One(box)
    box.append(one)
    assert repr(one) == "One(only=[...])"


def test_a_record_compares_and_prints_as_a_dataclass_and_is_not_hashable() -> None:
    for left in ({"name": "a"}, {"name": "a", "size": 1}, {"name": "a", "note": "n"}, {"name": "a", "items": [1]}):
        for right in ({"name": "a"}, {"name": "a", "size": 1}, {"name": "a", "note": "n"}, {"name": "a", "items": [1]}):
            assert (Mutable(**left) == Mutable(**right)) == (MutableReference(**left) == MutableReference(**right))
        assert repr(Mutable(**left)) == repr(MutableReference(**left)).replace("MutableReference", "Mutable", 1)
    made = Mutable("a")
    made.size = 2  # mutable: a plain attribute
    assert made == Mutable("a", 2) and Mutable("a").items is not Mutable("a").items
    with pytest.raises(TypeError):
        hash(made)


def test_a_class_that_writes_eq_alone_gets_the_dataclass_hash_rule() -> None:
    # Python sets __hash__ = None beside a written __eq__; the dataclass rule still decides.
    with pytest.raises(TypeError):
        hash(WritesEq(1))
    assert hash(FrozenWritesEq(1)) == hash(FrozenWritesEq(1)) and FrozenWritesEq(1) == FrozenWritesEq(2)


# -- __init__: the dataclass's parameters and field values, from records' shorter source ----------

_KINDS = ("required", "default", "factory")
_Spec = tuple[str, bool, bool]  # (kind, kw_only, init)


def _namespace(specs: list[_Spec]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__annotations__": {f"f{i}": "Any" for i in range(len(specs))}}
    for i, (kind, kw_only, init) in enumerate(specs):
        options: dict[str, Any] = {"kw_only": kw_only, "init": init}
        if kind == "default":
            options["default"] = i
        elif kind == "factory":
            options["default_factory"] = list
        namespace[f"f{i}"] = field(**options)
    return namespace


def _made_both(specs: list[_Spec], slots: bool) -> tuple[Any, Any]:
    """The class as ``dataclass`` makes it and as ``record`` does, or the error each raised."""
    made: list[Any] = []
    for make in (dataclass(slots=slots), record(slots=slots)):
        try:
            made.append(make(type("Shape", (), _namespace(specs))))
        except TypeError as exc:
            made.append(type(exc))
    return made[0], made[1]


def _state(obj: Any, count: int) -> dict[str, Any]:
    return {f"f{i}": getattr(obj, f"f{i}", "unset") for i in range(count)}


def _parameters(cls: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(cls.__init__).parameters.values()]


@settings(max_examples=300, deadline=None)
@given(
    specs=st.lists(st.tuples(st.sampled_from(_KINDS), st.booleans(), st.booleans()), max_size=6),
    slots=st.booleans(),
    passed=st.integers(min_value=0, max_value=63),
)
def test_init_takes_and_sets_what_the_dataclass_init_does(specs: list[_Spec], slots: bool, passed: int) -> None:
    reference, made = _made_both(specs, slots)
    if not isinstance(reference, type) or issubclass(reference, BaseException):
        assert made is reference  # both refuse the class (a required field after a defaulted one)
        return
    params = _parameters(reference)
    # The factory's sentinel differs: the dataclass's is its own _HAS_DEFAULT_FACTORY.
    assert [(n, k) for n, k, _ in _parameters(made)] == [(n, k) for n, k, _ in params]
    kinds = {f"f{i}": kind for i, (kind, _, _) in enumerate(specs)}
    for (name, _, ours), (_, _, theirs) in zip(_parameters(made)[1:], params[1:]):
        assert ours == theirs or kinds[name] == "factory"
    # Every required parameter, and the optional ones the bits of ``passed`` pick, given a value;
    # past a left-out one, by keyword.
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    skipped = False
    for bit, (name, kind, default) in enumerate(params[1:]):
        if default is not inspect.Parameter.empty and not passed >> bit & 1:
            skipped = True
            continue
        if kind is inspect.Parameter.KEYWORD_ONLY or skipped:
            kwargs[name] = f"value of {name}"
        else:
            args.append(f"value of {name}")
    one, other = reference(*args, **kwargs), made(*args, **kwargs)
    assert _state(other, len(specs)) == _state(one, len(specs))
    for i, (kind, _, _) in enumerate(specs):
        if kind == "factory" and isinstance(getattr(other, f"f{i}", None), list):
            assert getattr(other, f"f{i}") is not getattr(made(*args, **kwargs), f"f{i}")  # a new value each time


def test_init_keeps_a_field_named_self_and_calls_post_init() -> None:
    @record
    class Odd:
        self: int
        seen: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            self.seen.append(self.self)

    odd = Odd(3)
    assert (odd.self, odd.seen) == (3, [3]) and Odd.__init__.__qualname__.endswith("Odd.__init__")


def test_init_refuses_what_it_does_not_support() -> None:
    with pytest.raises(TypeError):
        record(type("Var", (), {"__annotations__": {"x": "dataclasses.InitVar[int]"}}))
    with pytest.raises(TypeError):
        record(type("Reserved", (), {"__annotations__": {"_records_factory": "int"}}))


def test_a_class_without_a_docstring_gets_one_from_its_fields() -> None:
    @frozen(kw_only=True)
    class Bare:
        first: int
        second: str = ""
        hidden: int = field(default=0, init=False)

    @record
    class Told:
        """Its own."""

        value: int

    assert Bare.__doc__ == "Bare(first, second)" and Told.__doc__ == "Its own."
