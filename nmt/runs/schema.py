"""The rules a value read from a run's records must pass, in one place: its type, its range, a
finite number, printable single-line text of bounded length.

A :class:`Fields` wraps one JSON table read from a file; each accessor returns the value typed,
or raises one line naming the file and the field (``RUN/corpus.json: sources[2].weight:
expected a finite number > 0, got 'heavy'``). What a model card says comes through here, so no
value of someone else's making reaches it unchecked.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from nmt.errors import CheckpointError, NmtError, shown

TEXT_CAP = 300  # characters of a name, a licence, a signature
MISSING: Any = object()  # no default: the field must be there
SHA256 = re.compile(r"[0-9a-f]{64}")


class Fields:
    """A JSON table of the file ``path``, at ``field`` (``""``: the whole file)."""

    def __init__(self, table: Any, path: Path, field: str = "",
                 error: type[NmtError] = CheckpointError) -> None:
        self.path, self.field, self.error = Path(path), field, error
        if not isinstance(table, dict):
            raise self.bad("", "a table", table)
        self.table: dict[str, Any] = table

    def name(self, key: str) -> str:
        """``key``'s full name in the file (``sources[2].weight``)."""
        return f"{self.field}.{key}" if self.field and key else (self.field or key)

    def bad(self, key: str, expected: str, value: Any) -> NmtError:
        where = self.name(key) or "the file"
        return self.error(f"{self.path}: {where}: expected {expected}, got {shown(value, 40)}")

    def has(self, key: str) -> bool:
        return self.table.get(key) is not None

    def _get(self, key: str, default: Any) -> Any:
        value = self.table.get(key)
        if value is None and default is MISSING:
            raise self.bad(key, "a value", None)
        return value

    def text(self, key: str, default: Any = MISSING, cap: int = TEXT_CAP) -> Any:
        """Printable text on one line, at most ``cap`` characters (``default`` when absent)."""
        value = self._get(key, default)
        if value is None:
            return default
        if not (isinstance(value, str) and value.isprintable() and len(value) <= cap):
            raise self.bad(key, f"printable text on one line of at most {cap} characters", value)
        return value

    def count(self, key: str, default: Any = MISSING, low: int = 0, high: int = 2**62) -> Any:
        """A whole number from ``low`` to ``high`` (``default`` when absent)."""
        value = self._get(key, default)
        if value is None:
            return default
        if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
            raise self.bad(key, f"a whole number from {low} to {high}", value)
        return value

    def number(self, key: str, default: Any = MISSING, low: float = 0.0,
               high: float = 1e12, above: bool = False) -> Any:
        """A finite number from ``low`` (excluded when ``above``) to ``high``."""
        value = self._get(key, default)
        if value is None:
            return default
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and (value > low if above else value >= low)
                and value <= high):
            raise self.bad(key, f"a finite number {'>' if above else '>='} {low:g} and <= "
                                f"{high:g}", value)
        return float(value)

    def digest(self, key: str, default: Any = MISSING) -> Any:
        """A SHA-256 in hexadecimal."""
        value = self._get(key, default)
        if value is None:
            return default
        if not (isinstance(value, str) and SHA256.fullmatch(value)):
            raise self.bad(key, "a SHA-256 (64 hexadecimal digits)", value)
        return value

    def sub(self, key: str, default: Any = MISSING) -> Any:
        """The table at ``key`` as :class:`Fields` (``default`` when absent)."""
        value = self._get(key, default)
        if value is None:
            return default
        if not isinstance(value, dict):
            raise self.bad(key, "a table", value)
        return Fields(value, self.path, self.name(key), self.error)

    def _listed(self, key: str, cap: int, what: str) -> list[Any]:
        """The list at ``key`` (empty when absent), of at most ``cap`` ``what``."""
        value = self.table.get(key)
        if value is None:
            return []
        if not (isinstance(value, list) and len(value) <= cap):
            raise self.bad(key, f"a list of at most {cap} {what}", value)
        return value

    def subs(self, key: str, cap: int = 1000) -> list[Fields]:
        """The tables listed at ``key`` (none when absent)."""
        value = self._listed(key, cap, "tables")
        return [Fields(item, self.path, f"{self.name(key)}[{i}]", self.error)
                if isinstance(item, dict) else _raise(self.bad(f"{key}[{i}]", "a table", item))
                for i, item in enumerate(value)]

    def texts(self, key: str, cap: int = 1000) -> list[str]:
        """The texts listed at ``key`` (none when absent)."""
        value = self._listed(key, cap, "texts")
        holder = Fields({str(i): v for i, v in enumerate(value)}, self.path, self.name(key),
                        self.error)
        return [holder.text(str(i)) for i in range(len(value))]

    def counts(self, key: str) -> dict[str, int]:
        """A table of names to whole numbers >= 0 (empty when absent)."""
        table = self.sub(key, None)
        if table is None:
            return {}
        for name in table.table:
            if not (name.isprintable() and 0 < len(name) <= 60):
                raise table.bad("", "names of printable text on one line", name)
        return {name: table.count(name) for name in table.table}


def _raise(error: NmtError) -> Any:
    raise error
