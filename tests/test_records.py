"""``record`` and ``frozen``: the equality, hash and repr of ``@dataclass`` and ``@dataclass(frozen=True)``,
with no code compiled."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

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
