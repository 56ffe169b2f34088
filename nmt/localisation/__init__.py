"""Localisation files in and out: the untranslated strings of a PO (gettext) or XLIFF (1.2,
2.x) file filled by a translator, everything else left as it was.

One module per format (:mod:`~nmt.localisation.po`, :mod:`~nmt.localisation.xliff`), each with
``fill(data, name, translate, language, checks) -> (bytes, Filled)``. What they share is here:
which format a file is, reading it whole within a bound, the checks every translation passes
before it is written, and writing the result atomically (a failure leaves no half file).

A string reaches the translator cut into its lines, all of a file in one call
(:func:`~nmt.localisation.filled.translate_texts`); how a line comes back, its ends kept and a
blank line unchanged, is the translation's rule, in one place (:mod:`nmt.translation.layout`).

A string nmt writes is marked for review (PO: ``fuzzy``; XLIFF: ``needs-review-translation``);
one whose translation fails a check (placeholders of a ``c-format`` entry, inline tags) is left
untranslated and reported, never written broken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from nmt.arguments import option
from nmt.data.compressed import plain_name
from nmt.errors import DataError, os_reason
from nmt.files import atomic_write_bytes, path_problem
from nmt.localisation.filled import Filled, NamedCheck, Translate
from nmt.localisation.placeholders import Check

FORMATS = ("po", "xliff", "text")
# (Trados' .sdlxliff and memoQ's .mqxliff are XLIFF 1.2 with extensions of their own)
EXTENSIONS = {".po": "po", ".pot": "po", ".xlf": "xliff", ".xliff": "xliff",
              ".sdlxliff": "xliff", ".mqxliff": "xliff"}
# a localisation file is read whole: 64 MiB is far beyond the largest catalogues (a desktop's
# biggest PO files are a few MiB) and bounds what a wrong file costs
MAX_FILE_BYTES = 64 << 20


def format_of(path: Path | None, given: str | None) -> str:
    """The format of ``path``: ``given`` (po, xliff or text), else from the extension
    (:data:`EXTENSIONS`), else text."""
    if given is not None:
        if given not in FORMATS:
            raise DataError(f"{option('format')} {given}: expected one of {', '.join(FORMATS)}")
        return given
    if path is None:
        return "text"
    plain = Path(plain_name(path.name))
    if plain.name != path.name and plain.suffix.lower() in EXTENSIONS:
        raise DataError(f"{option('input')} {path}: a compressed {plain.suffix} file; "
                        "decompress it first (a localisation file is filled as it is written)")
    return EXTENSIONS.get(path.suffix.lower(), "text")


def read_file(path: Path, name: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (``name``: how messages call it), refused in one
    line when it is no regular file (a FIFO, a device: it may never end), larger than
    ``limit`` or not text (a NUL byte)."""
    problem = path_problem(path)
    if problem is not None:
        raise DataError(f"{name}: {problem}")
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise DataError(f"{name}: cannot read ({os_reason(e)})") from None
    if len(data) > limit:
        raise DataError(f"{name}: larger than {limit >> 20} MiB; split the catalogue")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise DataError(f"{name}: line {line}: not a text file (a NUL byte; UTF-16 is not "
                        "read, convert it to UTF-8)")
    return data


def fill_file(
    input: Path, output: Path, translate: Translate, *, format: str,  # noqa: A002
    language: Callable[[], str | None] = lambda: None, check: Check | None = None,
    name: str | None = None, output_name: str | None = None,
) -> Filled:
    """Fill the untranslated strings of ``input`` (a ``format`` file) with ``translate`` and
    write the whole file to ``output``, atomically. ``translate``: lines as written -> their
    translations, laid out as the source (:data:`~nmt.localisation.filled.Translate`);
    ``language``: gives the translator's target language (the PO header's ``Language`` and
    ``Plural-Forms`` when the file has none), asked once the file is read (so a translator
    opened on demand opens only for a good file); ``check``: a further
    ``check(source, translation) -> bool`` every translation must pass."""
    from nmt.localisation import po, xliff

    fill = {"po": po.fill, "xliff": xliff.fill}[format]
    name = name or str(input)
    data = read_file(input, name)
    checks: Sequence[NamedCheck] = [("the check refused it", check)] if check else []
    written, filled = fill(data, name, translate, language, checks)
    atomic_write_bytes(output, lambda f: f.write(written), output_name or str(output))
    return filled

