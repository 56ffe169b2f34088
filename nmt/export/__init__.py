"""Export a trained run to the engines models are deployed with: CTranslate2, and Argos Translate
(whose ``.argosmodel`` packages LibreTranslate serves) on top of it.

An export target is one module, registered in :data:`TARGETS` by name (``nmt export --to NAME``
and its ``--help`` list what is registered), with one function::

    def export(run: LoadedRun, output: Path | None, quantization: str | None,
               overwrite: bool) -> Path

which writes the export of the loaded run (``output`` None: a default under ``exports/``, see
:func:`output_path`) and returns its path; optionally ``check(config, quantization, where)``
refuses a run before its weights are loaded. To add one, copy :mod:`nmt.export.argos` and call
:func:`register_target` (or add a line to :data:`TARGETS`).

- :mod:`nmt.export.ct2_convert`: the CTranslate2 converter (torch), the ``ctranslate2`` target;
- :mod:`nmt.export.ct2_directory`: what an export directory holds (no torch);
- :mod:`nmt.export.ct2_translate`: :class:`~nmt.export.ct2_translate.CT2Translator`, which
  translates with an export the way :class:`~nmt.translation.translator.Translator` does with the
  PyTorch model, without importing torch;
- :mod:`nmt.export.argos`: the ``.argosmodel`` package, the ``argos`` target.

CTranslate2 is an optional dependency (``pip install 'nmt[ctranslate2]'``); this module imports
without it, and :func:`require_ctranslate2` turns its absence into a one-line error.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from nmt.arguments import option
from nmt.errors import NmtError


@dataclass(frozen=True)
class Target:
    """A registered export target: the module that writes it and one line for ``--help``."""

    module: str
    summary: str
    needs_ctranslate2: bool = False


TARGETS: dict[str, Target] = {
    "ctranslate2": Target("nmt.export.ct2_convert", "a CTranslate2 model directory", True),
    "argos": Target("nmt.export.argos", "an .argosmodel package for Argos Translate and "
                    "LibreTranslate", True),
}
INSTALL_HINT = "pip install 'nmt[ctranslate2]' (or pip install ctranslate2)"


def register_target(name: str, module: str, summary: str,
                    needs_ctranslate2: bool = False) -> None:
    """Make ``nmt export --to NAME`` write through ``module`` (imported when used)."""
    TARGETS[name] = Target(module, summary, needs_ctranslate2)


def targets_help() -> str:
    """The registered targets, as ``--to``'s help lists them."""
    return "; ".join(f"{name}: {t.summary}" for name, t in TARGETS.items())


def export_target(name: str) -> ModuleType:
    """The module of the target ``name`` (a one-line error naming ``--to`` for an unknown one,
    or when the target needs CTranslate2 and it is not installed)."""
    if name not in TARGETS:
        raise NmtError(f"{option('to')} {name}: expected one of {', '.join(TARGETS)}")
    if TARGETS[name].needs_ctranslate2:
        require_ctranslate2(f"{option('to')} {name}")
    return importlib.import_module(TARGETS[name].module)


def output_path(output: Path | None, default: str) -> tuple[Path, str]:
    """Where an export goes (``output``, else ``exports/DEFAULT``) and how messages name it:
    what the user named (``--output OUTPUT``), else the default path."""
    if output is not None:
        return Path(output), f"{option('output')} {output}"
    path = Path("exports") / default
    return path, str(path)


def require_ctranslate2(what: str = "--engine ctranslate2") -> None:
    """Raise a one-line :class:`NmtError` unless the ``ctranslate2`` package imports."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise NmtError(f"{what}: the ctranslate2 package is not installed; {INSTALL_HINT}"
                       ) from None
