"""Shell variables and template fields: ``${VAR}``, ``${1}``, ``$VAR``, ``{{ var }}``,
``{{ user.name | upper }}`` and ``{% if x %}`` (Jinja, Django, Mustache, Handlebars).

``$5`` is money, not a variable: ``$`` is followed by a letter or an underscore. A tag ends at
the first ``%}`` and holds no ``{%``: an opening without its end is text, found in one pass."""

from __future__ import annotations

import re
from collections.abc import Iterator

from nmt.data.spans.unspaced import WORD

PATTERN = re.compile(
    r"\$\{[^{}\s]+\}"
    rf"|\$[A-Za-z_]{WORD}*"  # (``$HOMEを``: :mod:`nmt.data.spans.unspaced`)
    r"|\{\{[^{}\n]*\}\}"
    r"|\{%(?:(?!\{%|%\})[^\n])*%\}"
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
