"""The environment variables nmt reads, each declared once with what it accepts, and read
through one function (:func:`read`): a value it does not accept is a one-line
:class:`ConfigError` naming the variable and the accepted values, never ignored."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from nmt.errors import ConfigError, shown


def _one_of(*values: str) -> Callable[[str], bool]:
    return lambda text: text in values


def _printable(text: str) -> bool:
    return text.isprintable()


@dataclass(frozen=True)
class Variable:
    expected: str  # what it accepts, in words
    accepts: Callable[[str], bool]


LAUNCHER = "checked against the run's size by nmt.training.distributed"
VARIABLES: dict[str, Variable] = {
    "NMT_CPU_BF16": Variable("0 (compute in fp32 on this CPU) or 1 (compute in bf16: it has "
                             "bf16 units)", _one_of("0", "1")),
    "NMT_NO_PROGRESS": Variable("1 (a line every log_every steps instead of a progress bar) "
                                "or 0", _one_of("0", "1")),
    "NMT_DATA_DIR": Variable("a directory (printable text)", _printable),
    "NMT_DATA_MIRROR": Variable("a zip file, a directory holding one, or a URL (printable "
                                "text)", _printable),
    "NMT_CORPUS_SHA256": Variable("a SHA-256 digest (64 hexadecimal digits), or unset it for "
                                  "the published corpus",
                                  lambda text: re.fullmatch(r"[0-9a-fA-F]{64}", text) is not None),
    # torch's: where Inductor caches what it compiles (nmt.device.separate_compiled_kernels)
    "TORCHINDUCTOR_CACHE_DIR": Variable("a directory (printable text)", _printable),
    # torchrun's: their ranges depend on each other (nmt.training.distributed)
    **{name: Variable(LAUNCHER, lambda text: True)
       for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")},
}


def read(name: str) -> str | None:
    """The value of the environment variable ``name`` (one of :data:`VARIABLES`), None when
    unset or empty; one it does not accept is a one-line error naming it."""
    text = os.environ.get(name) or None
    variable = VARIABLES[name]
    if text is not None and not variable.accepts(text):
        raise ConfigError(f"{name}={shown(text, 80)}: expected {variable.expected}")
    return text


def said(name: str) -> str | None:
    """``"NAME=VALUE"`` when the variable ``name`` is set (a log saying the user's variable
    decided), else None."""
    text = read(name)
    return None if text is None else f"{name}={text}"


def check_all() -> None:
    """Read every variable nmt reads: a command refuses a bad one before it does anything."""
    for name in VARIABLES:
        read(name)
