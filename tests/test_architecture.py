"""docs/ARCHITECTURE.md stays true: every module it names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_architecture_names_only_existing_modules() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"nmt/[\w/]*\w+\.py", text)) | set(re.findall(r"nmt/[\w/]+/", text))
    assert len(named) > 10
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"docs/ARCHITECTURE.md names what is gone: {missing}"
