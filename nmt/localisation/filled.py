"""What filling a localisation file reports, and the form of the checks a format applies."""

from __future__ import annotations

from dataclasses import dataclass, field

from nmt.localisation.placeholders import Check


@dataclass
class Filled:
    """What filling a file did: how many strings nmt translated and left untranslated (that
    it would have filled), and a line for each of those and every warning."""

    format: str
    filled: int = 0
    left: int = 0
    messages: list[str] = field(default_factory=list)


# (reason a translation is refused, check); the format's own checks come first
NamedCheck = tuple[str, Check]
