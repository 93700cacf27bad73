"""`once`: a value computed on first read and kept in the instance's `__dict__`, so that every
later read is a plain attribute read that never reaches the descriptor (a non-data descriptor).
What `functools.cached_property` does without its per-read lock (Python 3.11 takes an RLock on
every first read); the latency model is single-threaded per engine, and a value computed twice
would be the same value (each is a pure function of its inputs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class once(Generic[T]):
    """Decorates a method of no arguments: its result, computed on the first read and stored under
    the method's name in the instance's `__dict__`."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> once[T]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> once[T] | T:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value
