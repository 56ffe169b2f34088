"""What a model card reads passes one schema, and every value it shows is escaped: a crafted or
mistyped field of any file it reads gives a card whose text is escaped, or one line naming the
file and the field, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ctranslate2")

from conftest import invoke  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_export import sentencepiece_run  # noqa: E402

from nmt.errors import NmtError  # noqa: E402
from nmt.export.model_card import card_markdown, model_card  # noqa: E402

SOURCE = {"form": "aligned", "corpus": "/home/me/data/train", "sha256": "a" * 64,
          "source": "en", "target": "fr", "licence": "CC-BY-4.0", "files": ["/home/me/a.en"],
          "name": "train", "weight": 2.0, "read": 120, "kept": 100,
          "filtered": {"digits": 15}, "train_pairs": 90, "train_pairs_weighted": 180}
SCORE = {"bleu": 12.3, "chrf": 40.5, "beam": 5, "sentences": 7, "references": 1,
         "bleu_signature": "nrefs:1|tok:13a", "chrf_signature": "nrefs:1|nc:6"}
FILES: dict[str, dict[str, Any]] = {
    "corpus.json": {"corpus": {**SOURCE, "form": "sources", "name": "x"},
                    "sources": [SOURCE, {**SOURCE, "name": "second"}],
                    "test": {**SOURCE, "name": "my-test.tsv"}},
    "parent.json": {"run": "parent", "checkpoint": "best.pt", "step": 4, "sha256": "b" * 64,
                    "ancestors": [{"run": "parent", "checkpoint": "best.pt", "step": 4,
                                   "sha256": "b" * 64, "data": [SOURCE],
                                   "test_set": {"kind": "split"},
                                   "scores": {"nmt": SCORE}}]},
    "scores.test.json": {"checkpoint": "best.pt", "beam": 1, "sentences": 77,
                         "multi": {"bleu": 12.345, "chrf": 40.5, "references": 1,
                                   "bleu_signature": "nrefs:1|case:mixed",
                                   "chrf_signature": "nrefs:1|nc:6"}},
}
HEADINGS = ("## Model card", "### Data", "### Scores", "### Running it", "### Parent",
            "### Grandparent", "### Ancestor")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from nmt.runs.loading import load_run

    run = sentencepiece_run(tmp_path_factory.mktemp("home") / "runs" / "mine")
    return load_run(run, "best", "cpu")


def fresh() -> dict[str, Any]:
    """The crafted files, each its own copy (no value shared between two files)."""
    return {name: json.loads(json.dumps(doc)) for name, doc in FILES.items()}


def write(run_dir: Path, files: dict[str, Any]) -> None:
    for name, value in files.items():
        (run_dir / name).write_text(json.dumps(value), encoding="utf-8")


def check_markdown(text: str) -> None:
    """No tag, no heading of a value's making, every table row of six cells."""
    assert "<" not in text and ">" not in text.replace("&gt;", "")
    for line in text.splitlines():
        assert not line.startswith("#") or line.startswith(HEADINGS), line
        if line.startswith("|"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 7, line


def check_one_line(error: NmtError, name: str, field: str) -> None:
    message = str(error)
    assert "\n" not in message and f"{name}: " in message, message
    assert field in message, message


def card(loaded: Any) -> str:
    return card_markdown(model_card(loaded))


def test_the_crafted_files_give_a_card_that_names_them(loaded: Any) -> None:
    write(loaded.run_dir, FILES)
    text = card(loaded)
    check_markdown(text)
    assert "### Scores (test set: the file my-test.tsv (SHA-256 " + "a" * 64 + "))" in text
    assert "| nmt | 1 | 12.35 | 40.50 | 77 | nrefs:1\\|case:mixed; nrefs:1\\|nc:6 |" in text
    assert "### Parent: run parent (best.pt, step 4" in text
    assert "/home/me" not in text and "/home/me" not in json.dumps(model_card(loaded))
    # what an engine without nmt (the Argos package's) does not keep is said plainly
    assert "Run without nmt (argostranslate, LibreTranslate, or CTranslate2 directly)" in text


@pytest.mark.parametrize(("name", "keys", "value", "field"), [
    ("corpus.json", ("sources", 0, "licence"), "GPL\n# Injected heading", "sources[0].licence"),
    ("corpus.json", ("sources", 0, "weight"), "heavy", "sources[0].weight"),
    ("corpus.json", ("sources", 0, "weight"), float("nan"), "sources[0].weight"),
    ("corpus.json", ("sources", 0, "filtered"), {"digits": "15"}, "sources[0].filtered"),
    ("corpus.json", ("sources", 0, "filtered"), [1, 2], "sources[0].filtered"),
    ("corpus.json", ("sources", 0, "files"), 5, "sources[0].files"),
    ("scores.test.json", ("beam",), "5\n## x", "beam"),
    ("scores.test.json", ("multi", "bleu"), 1e308, "multi.bleu"),
    ("parent.json", ("ancestors", 0, "run"), "evil`\n\n# Injected\n<script>", "ancestors[0].run"),
    ("parent.json", ("ancestors", 0, "run"), "../../x", "ancestors[0].run"),
])
def test_a_crafted_value_is_one_line_naming_file_and_field(
        loaded: Any, name: str, keys: tuple[Any, ...], value: Any, field: str) -> None:
    files = fresh()
    _set(files[name], keys, value)
    write(loaded.run_dir, files)
    with pytest.raises(NmtError) as e:
        card(loaded)
    check_one_line(e.value, name, field)


def test_a_licence_with_markup_is_escaped(loaded: Any) -> None:
    files = fresh()
    files["corpus.json"]["sources"][0]["licence"] = "# Heading <script>alert(1)</script> | x"
    write(loaded.run_dir, files)
    text = card(loaded)
    check_markdown(text)
    assert "Licence: \\# Heading &lt;script&gt;alert(1)&lt;/script&gt; \\| x" in text


def test_nmt_export_refuses_a_mistyped_record_in_one_line(loaded: Any, tmp_path: Path) -> None:
    files = fresh()
    files["corpus.json"]["sources"][1]["weight"] = "heavy"
    write(loaded.run_dir, files)
    code, _, err = invoke("export", "--run", str(loaded.run_dir), "--to", "argos", "--no-score",
                          "--output", str(tmp_path / "p.argosmodel"))
    assert code == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "corpus.json: sources[1].weight: expected a finite number" in err
    assert not (tmp_path / "p.argosmodel").exists()


def _set(doc: Any, keys: tuple[Any, ...], value: Any) -> None:
    for key in keys[:-1]:
        doc = doc[key]
    doc[keys[-1]] = value


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``doc`` a value sits, containers included."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


PLACES = [(name, keys) for name, doc in FILES.items() for keys in _paths(doc)]
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["5\n## x", "<script>alert(1)</script>", "# heading", "a|b", "`x`",
                     "../../etc", "x" * 5000, "", "\x1b[31m", "*bold* _it_ [l](u)"]),
    st.text(max_size=40), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(PLACES), value=VALUES)
def test_any_mutated_field_is_escaped_or_one_line(loaded: Any, place: tuple[str, Any],
                                                  value: Any) -> None:
    name, keys = place
    files = fresh()
    _set(files[name], keys, value)
    write(loaded.run_dir, files)
    try:
        text = card(loaded)
    except NmtError as e:
        check_one_line(e, name, str(keys[0]))
        return
    check_markdown(text)
