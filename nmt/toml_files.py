"""TOML files: a config read (one line naming the file for anything wrong with it) and written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from nmt.errors import ConfigError
from nmt.files import path_problem, read_stored_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def read_toml(path: str | Path | None, folder: Path | None = None) -> dict[str, Any]:
    """The tables of the TOML file ``path`` ({} for None); a one-line error naming it.
    ``folder``: the run it is a file of (a link out of it is refused)."""
    raw: dict[str, Any] = {}
    where = "defaults"
    if path is not None:
        p = Path(path)
        where = str(p)
        problem = path_problem(p, called="config file")
        if problem:
            raise ConfigError(f"{where}: {problem}; expected a TOML config file")
        try:
            # utf-8-sig: a byte-order mark (Windows editors write one) is not TOML's business
            raw = tomllib.loads(read_stored_bytes(p, folder, ConfigError).decode("utf-8-sig"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{where}: not valid TOML: {e}") from None
        except RecursionError:
            raise ConfigError(f"{where}: not valid TOML: nested too deeply") from None
        except OSError as e:
            raise ConfigError(f"{where}: cannot read ({e.strerror or e})") from None
    return raw


def toml_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    s = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def dump_toml(data: dict[str, dict[str, Any]]) -> str:
    """Write sections of scalar values as TOML (all a config holds)."""
    out = []
    for section, table in data.items():
        out.append(f"[{section}]")
        out.extend(f"{k} = {toml_value(v)}" for k, v in table.items())
        out.append("")
    return "\n".join(out)
