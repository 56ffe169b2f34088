"""The arguments of the Python API, checked as the command line checks its options: one rule
per kind of argument (a list of sentences, a count, a path, a choice), each error naming the
parameter and what was expected, raised before any model is loaded.

The command line goes through the same functions (:mod:`nmt.api`), so both refuse alike: a
:class:`TypeError` for a value of the wrong type, a :class:`~nmt.errors.ConfigError` for one out
of range.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from nmt.errors import ConfigError, shown
from nmt.setting_ranges import int_limit

SPLITS = ("train", "valid", "test")  # what nmt bleu scores a run on

_spelling: ContextVar[Callable[[str], str] | None] = ContextVar("option_spelling", default=None)


def option(name: str) -> str:
    """How a message names the parameter ``name`` of the API: as Python spells it
    (``input``), or, while a command of the command line runs (:func:`spelled_as`), as the
    option the user typed (``--input``). Messages name what the caller gave, in its words."""
    spell = _spelling.get()
    return spell(name) if spell is not None else name


@contextmanager
def spelled_as(spell: Callable[[str], str]) -> Iterator[None]:
    """Within the block, :func:`option` names parameters with ``spell`` (the command line's
    options)."""
    token = _spelling.set(spell)
    try:
        yield
    finally:
        _spelling.reset(token)


def sentences(value: Any, name: str = "sentences") -> Iterable[str]:
    """A list (or any iterable) of sentences, each a ``str``; one string is refused (it would
    be read as a list of characters), as are bytes and items that are not strings. A list is
    checked now; another iterable item by item as it is read (it may be a stream)."""
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"{name}: expected a list of sentences, got one {type(value).__name__} "
                        f"({shown(value)}); wrap it in a list: [{shown(value)}]")
    _not_a_listing(value, name, "sentences")
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _sentence(item, f"{name}[{i}]")
        return value
    return (_sentence(item, f"{name}[{i}]") for i, item in enumerate(value))


def _not_a_listing(value: Any, name: str, what: str) -> None:
    """Refuse what is no ordered list of ``what``: a non-iterable, a mapping (iterating it gives
    its keys, not its values) or a set (its order is not the caller's, so outputs could not be
    matched with inputs)."""
    kind = ("a mapping" if isinstance(value, Mapping) else "a set" if isinstance(value, Set)
            else None if isinstance(value, Iterable) else "")
    if kind is None:
        return
    got = f"{kind} ({shown(value)})" if kind else shown(value)
    hint = "; pass its values as a list" if isinstance(value, Mapping) else \
        "; pass them in a list, in the order wanted" if kind else ""
    raise TypeError(f"{name}: expected a list of {what}, got {got}{hint}")


def _sentence(item: Any, name: str) -> str:
    if not isinstance(item, str):
        raise TypeError(f"{name}: expected a sentence (str), got {shown(item)}")
    return item


def count(value: Any, name: str, key: str, *, optional: bool = True) -> int | None:
    """A count of at least 1 and at most what the config allows for ``key`` (``decode.beam``):
    ``None`` (the run's own) when ``optional``. A value out of range is named as its caller
    gave it (:func:`option`), as every check here that a command line can reach."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an integer, got {shown(value)}")
    if not 1 <= value <= int_limit(key):
        raise ConfigError(f"{option(name)}: expected 1 <= {name} <= {int_limit(key)}, "
                          f"got {value}")
    return value


def seed(value: Any, name: str = "seed") -> int:
    """A random seed: an integer from 0 to the bound of ``train.seed`` (what numpy takes), the
    same bound ``--seed`` has on the command line."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an integer, got {shown(value)}")
    if not 0 <= value <= int_limit("train.seed"):
        raise ConfigError(f"{option(name)}: expected 0 <= {name} <= {int_limit('train.seed')}, "
                          f"got {value}")
    return value


def path(value: Any, name: str, *, optional: bool = True) -> Path | None:
    """A path (``str`` or ``os.PathLike``), ``None`` when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or value == "":
        raise TypeError(f"{name}: expected a path, got {shown(value)}")
    return Path(value)


def paths(value: Any, name: str) -> list[Path]:
    """A list of paths; one path on its own is refused (it would be read as characters)."""
    if isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: expected a list of paths, got one ({shown(value)}); wrap it "
                        f"in a list: [{shown(value)}]")
    _not_a_listing(value, name, "paths")
    return [p for i, v in enumerate(value) if (p := path(v, f"{name}[{i}]", optional=False))]


def choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """One of ``choices``."""
    allowed = tuple(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected one of {', '.join(allowed)}, got {shown(value)}")
    if value not in allowed:
        raise ConfigError(f"{option(name)}: expected one of {', '.join(allowed)}, "
                          f"got {shown(value)}")
    return value


def text(value: Any, name: str, *, optional: bool = False) -> str | None:
    """A string (``None`` too when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a string, got {shown(value)}")
    return value


def flag(value: Any, name: str) -> bool:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, got {shown(value)}")
    return value
