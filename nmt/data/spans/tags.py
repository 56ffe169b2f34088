"""XML and HTML tags, each one a span: ``<b>``, ``</b>``, ``<br/>``, ``<a href="x.html">``,
``<x:ph id="1"/>``, and comments ``<!-- ... -->``.

Tags are kept one by one; a tag opened and not closed (``<b>Save``) keeps the tag it has.
A ``<`` not followed by a name (``a < b``) is text, and so is ``<unk>``, the mark a word
tokenizer writes for a word it does not know.

A word in angle brackets is a tag only when something says it is markup: it closes (``</b>``)
or closes itself (``<br/>``), it has an attribute with a value (``<a href="x">``), it is an
element of HTML or of the inline markup localisation files carry (``<b>``, ``<em>``, ``<ph>``,
:data:`ELEMENTS`), or the text closes it later (``<key>Enter</key>``). Otherwise it is the
metavariable of a usage text (``<NUMBER>``, ``<file>``, ``[<prefix>]``, ``<corrupt X4>``),
which translators translate (``<NOMBRE>``, ``<fichier>``): text, not a span.

:func:`unpaired` says which tags of a text no other pairs with (``</b> <b>``, ``<b><i></b></i>``):
a translation must nest its tags as its source does, not only hold the same ones."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

_VALUE = r"""(?:"[^"<>\n]*"|'[^'<>\n]*'|[^\s"'=<>`]+)"""
PATTERN = re.compile(
    rf"</?(?!unk>)(?P<name>[A-Za-z][\w:.-]*)(?P<attributes>(?:\s+[A-Za-z_:][\w:.-]*"
    rf"(?:\s*=\s*{_VALUE})?)*)\s*(?P<self>/?)>"
    r"|<!--(?:(?!<!--|-->).)*-->"  # a comment holds no other: a text of openings is read once
)

# HTML's elements that stand in running text, and the inline elements of XLIFF, TMX and
# DocBook-like help files: a tag of one of these is markup even when nothing closes it
ELEMENTS = frozenset("""
    a abbr b bdi bdo big blink br button cite code col del dfn em font hr i img input ins kbd
    label li mark meta nobr ol p param q rp rt ruby s samp small source span strike strong sub
    sup table tbody td th thead tr tt u ul var video wbr div h1 h2 h3 h4 h5 h6 pre blockquote
    center dd dl dt figure option select textarea title
    g x bx ex ph bpt ept it mrk sub hi qt
""".split())


# HTML's void elements: ``<br>`` opens nothing that a ``</br>`` closes
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# elements that stand between words rather than inside one: a line break, a paragraph, a cell
SEPARATE = VOID | frozenset("""
    p div li ul ol dl dt dd table tr td th thead tbody h1 h2 h3 h4 h5 h6 pre blockquote
""".split())


def name(tag: str) -> str:
    """The element ``tag`` opens or closes, in lower case ("" for a comment)."""
    m = PATTERN.fullmatch(tag)
    return m["name"].lower() if m is not None and m["name"] is not None else ""


def opens(tag: str) -> bool:
    """Whether ``tag`` opens an element that a closing tag ends (``<b>``, ``<a href=...>``;
    not ``</b>``, ``<br/>``, ``<br>`` or a comment)."""
    element = name(tag)
    return (bool(element) and not tag.startswith("</") and not tag.endswith("/>")
            and element not in VOID)


def _pairing(tags: Sequence[str]) -> tuple[list[tuple[int, int]], list[int]]:
    """The pairs of ``tags`` (opening index, closing index) and the indexes of those unpaired
    (:func:`unpaired`)."""
    open_: list[int] = []  # indexes of the elements open, the innermost last
    pairs: list[tuple[int, int]] = []
    left: list[int] = []
    for i, tag in enumerate(tags):
        element = name(tag)
        if opens(tag):
            open_.append(i)
        elif not element or not tag.startswith("</") or tag.endswith("/>"):
            continue
        elif open_ and name(tags[open_[-1]]) == element:
            pairs.append((open_.pop(), i))
        else:
            left.append(i)
    return sorted(pairs), sorted(left + open_)


def unpaired(tags: Sequence[str]) -> list[int]:
    """Which of ``tags`` (a text's tags in its order, each as written) no other pairs with: a
    closing tag pairs with the innermost element still open, when it is of its name; an
    opening tag with the closing tag that pairs with it. A tag that closes itself
    (``<br/>``), a void element (``<br>``) and a comment pair with nothing and are never
    unpaired. ``</b> <b>``: both unpaired; ``<b><i></b></i>``: ``</b>`` and ``<b>``."""
    return _pairing(tags)[1]


def pairs(tags: Sequence[str]) -> list[tuple[int, int]]:
    """The elements of ``tags`` (as :func:`unpaired` reads them): the index of each opening
    tag and of the closing tag that pairs with it."""
    return _pairing(tags)[0]


def _is_markup(m: re.Match[str], last_close: dict[str, int]) -> bool:
    """Whether the tag ``m`` is markup (the module's rule); ``last_close``: where the text
    closes each element last."""
    if m["name"] is None:  # a comment
        return True
    return (m[0].startswith("</") or bool(m["self"]) or "=" in m["attributes"]
            or m["name"].lower() in ELEMENTS or last_close.get(m["name"], -1) > m.start())


def find(text: str) -> Iterator[tuple[int, int]]:
    tags = list(PATTERN.finditer(text))
    last_close = {m["name"]: m.start() for m in tags if m[0].startswith("</")}
    for m in tags:
        if _is_markup(m, last_close):
            yield m.span()
