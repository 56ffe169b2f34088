"""Export a trained run to the engines models are deployed with: CTranslate2, and Argos Translate
(whose ``.argosmodel`` packages LibreTranslate serves) on top of it.

CTranslate2 is an optional dependency (``pip install 'nmt[ctranslate2]'``); this module imports
without it, and :func:`require_ctranslate2` turns its absence into a one-line error.

- :mod:`nmt.export.ct2`: the converter (a ``ctranslate2.converters.Converter``), the exported
  directory's layout, and :class:`~nmt.export.ct2.CT2Translator`, which translates with an
  export the way :class:`~nmt.translate.Translator` does with the PyTorch model.
- :mod:`nmt.export.argos`: the ``.argosmodel`` package.
"""

from __future__ import annotations

from nmt.errors import NmtError

TARGETS = ("ctranslate2", "argos")
INSTALL_HINT = "pip install 'nmt[ctranslate2]' (or pip install ctranslate2)"


def require_ctranslate2(what: str = "--engine ctranslate2") -> None:
    """Raise a one-line :class:`NmtError` unless the ``ctranslate2`` package imports."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise NmtError(f"{what}: the ctranslate2 package is not installed; {INSTALL_HINT}"
                       ) from None
