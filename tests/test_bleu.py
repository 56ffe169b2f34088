"""BLEU: the recipe's per-sentence formula (golden values), sacrebleu corpus scores with a
variable number of references, and `nmt bleu` on files, on a run's split and --examples."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from conftest import invoke
from test_decode import make_run

from nmt.evaluate import (
    EXAMPLES,
    corpus_scores,
    recipe_bleu,
    reference_streams,
    score_multi_and_single,
)

# --- the recipe's per-sentence BLEU --------------------------------------------------------------


def test_recipe_bleu_golden_values() -> None:
    # the textbook's: "he's calm ." -> "il est paresseux ." scores 0.658 against "il est calme ."
    assert recipe_bleu("il est paresseux .", "il est calme .") == pytest.approx(0.658, abs=5e-4)
    assert recipe_bleu("il est paresseux .", "il est calme .") == pytest.approx(
        math.sqrt(3 / 4) * (1 / 3) ** 0.25)
    for _, ref in EXAMPLES:
        assert recipe_bleu(ref, ref) == 1.0


def test_recipe_bleu_brevity_penalty_and_clipping() -> None:
    # 2 of 4 reference tokens: BP exp(1 - 4/2); unigrams 2/2, bigrams 1/1
    assert recipe_bleu("je suis", "je suis chez moi .".rsplit(" ", 1)[0]) == pytest.approx(
        math.exp(1 - 4 / 2))
    # clipped counts: "le le le" matches "le" once in "le chat": p1 = 1/3, weight 1/2
    assert recipe_bleu("le le le", "le chat", k=1) == pytest.approx((1 / 3) ** 0.5)


def test_recipe_bleu_is_guarded_against_short_hypotheses() -> None:
    assert recipe_bleu("va", "va !") == 0.0  # one token has no bigram: no division by zero
    assert recipe_bleu("va", "va !", k=1) == pytest.approx(math.exp(1 - 2))
    assert recipe_bleu("", "va !") == 0.0


# --- sacrebleu corpus scores ---------------------------------------------------------------------


HYPS = ["le chat est sur le tapis .", "il pleut .", "je suis chez moi ."]
REFS = [
    ["le chat est sur le tapis .", "un chat est sur le tapis ."],
    ["il pleut beaucoup ."],
    ["je suis à la maison .", "je suis chez moi .", "je rentre ."],
]


def test_reference_streams_pad_missing_references_with_none() -> None:
    streams = reference_streams(REFS)
    assert len(streams) == 3 and all(len(s) == 3 for s in streams)
    assert streams[1] == ["un chat est sur le tapis .", None, "je suis chez moi ."]
    assert streams[2] == [None, None, "je rentre ."]


def test_variable_references_equal_the_duplicate_reference_workaround() -> None:
    """None-padding must score like sacrebleu's documented workaround, repeating a reference."""
    padded = corpus_scores(HYPS, REFS)
    repeated = corpus_scores(HYPS, [r + [r[0]] * (3 - len(r)) for r in REFS])
    assert padded.bleu == pytest.approx(repeated.bleu)
    assert padded.chrf == pytest.approx(repeated.chrf)
    assert padded.bleu_signature.startswith("nrefs:var|")
    assert padded.references == 3 and padded.sentences == 3


def test_multi_and_single_reference_scores() -> None:
    scores = score_multi_and_single(HYPS, REFS)
    single = corpus_scores(HYPS, [r[:1] for r in REFS])
    assert scores["single"].bleu == pytest.approx(single.bleu)
    assert scores["single"].bleu_signature.startswith("nrefs:1|")
    # the third hypothesis matches its second reference exactly: more references, higher BLEU
    assert scores["multi"].bleu > scores["single"].bleu
    assert corpus_scores([r[0] for r in REFS], REFS).bleu == pytest.approx(100.0)


def test_corpus_scores_reject_misaligned_input() -> None:
    with pytest.raises(ValueError):
        corpus_scores(HYPS, REFS[:2])
    with pytest.raises(ValueError):
        corpus_scores(HYPS[:1], [[]])


# --- the command ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy")


def test_bleu_on_files_saves_hypotheses_and_scores(run_dir: Path, tmp_path: Path) -> None:
    src, ref1, ref2 = tmp_path / "t.en", tmp_path / "r1.fr", tmp_path / "r2.fr"
    src.write_text("a b c\nd e\nF G H\n", encoding="utf-8")
    ref1.write_text("c b a\ne d\nh g f\n", encoding="utf-8")
    ref2.write_text("c b a\n\nH G F\n", encoding="utf-8")  # an empty line: no second reference
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref1),
                          "--ref", str(ref2), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["sentences"] == 3 and report["beam"] == 1
    assert report["multi"]["bleu_signature"].startswith("nrefs:var|")
    assert report["single"]["bleu_signature"].startswith("nrefs:1|")
    hyps = Path(report["hypotheses"]).read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == 3 and Path(report["hypotheses"]).parent == run_dir
    assert json.loads(Path(report["scores"]).read_text(encoding="utf-8")) == report
    # the scores are those of the saved hypotheses; refs are normalised like the training data
    expected = corpus_scores(hyps, [["c b a", "c b a"], ["e d"], ["h g f", "h g f"]])
    assert report["multi"]["bleu"] == pytest.approx(expected.bleu)


def test_bleu_human_output_and_beam(run_dir: Path, tmp_path: Path) -> None:
    src, ref = tmp_path / "t.en", tmp_path / "r.fr"
    src.write_text("a b c\nd e\n", encoding="utf-8")
    ref.write_text("c b a\ne d\n", encoding="utf-8")
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                          "--beam", "3")
    assert code == 0
    lines = out.split("\n")
    assert "2 sentences, beam 3" in lines[0]
    # one reference per sentence: multi- and single-reference are one score, printed once
    assert lines[1].startswith("BLEU ") and "nrefs:1|case:mixed" in lines[1]
    assert lines[2].startswith("chrF ") and "nc:6" in lines[2]
    assert "multi-ref" not in out and "single-ref" not in out
    assert lines[3] == "spans           no spans in this test set"
    assert lines[4].startswith("hypotheses: ")
    assert (run_dir / "hyp.file-t.en.beam3.txt").is_file()
    ref2 = tmp_path / "r2.fr"
    ref2.write_text("c b a\nd e\n", encoding="utf-8")  # two references: both scores shown
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                          "--ref", str(ref2))
    assert code == 0 and [x.split()[1] for x in out.split("\n")[1:5]] == [
        "multi-ref", "multi-ref", "single-ref", "single-ref"]


@pytest.mark.parametrize(
    ("ref_text", "message"),
    [("c b a\n", "1 lines, but --src"), (None, "file not found")],
)
def test_bleu_file_errors_are_one_line(
    run_dir: Path, tmp_path: Path, ref_text: str | None, message: str
) -> None:
    src, ref = tmp_path / "t.en", tmp_path / "r.fr"
    src.write_text("a b c\nd e\n", encoding="utf-8")
    if ref_text is not None:
        ref.write_text(ref_text, encoding="utf-8")
    code, _, err = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref))
    assert code != 0
    assert message in err and str(ref) in err and err.strip().count("\n") == 0


def test_bleu_on_the_runs_test_split(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prepare(cfg.data, data_dir)` on a toy corpus; every reference of a source is used."""
    pairs = [(f"{a} {b}", f"{b} {a}") for a in "abcdefgh" for b in "abcdefgh"]
    pairs += [("a b", "b a !"), ("c d", "d c !")]  # second references
    corpus = "".join(f"{s}\t{t}\n" for s, t in pairs).encode("utf-8")
    data_dir = tmp_path / "data"
    (data_dir / "fra-eng").mkdir(parents=True)
    (data_dir / "fra-eng" / "fra.txt").write_bytes(corpus)
    monkeypatch.setenv("NMT_CORPUS_SHA256", hashlib.sha256(corpus).hexdigest())
    code, out, err = invoke("bleu", "--run", str(run_dir), "--data-dir", str(data_dir),
                            "--split", "test", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["data"] == "split test" and report["sentences"] >= 1
    assert Path(report["hypotheses"]).name == "hyp.test.txt"
    code, _, err = invoke("bleu", "--run", str(run_dir), "--data-dir", str(data_dir),
                          "--split", "dev")
    assert code != 0 and "--split: expected one of train, valid, test, got 'dev'" in err


def test_bleu_examples(run_dir: Path) -> None:
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--examples", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["src"], r["ref"]) for r in rows] == list(EXAMPLES)
    for r in rows:
        assert r["bleu"] == pytest.approx(recipe_bleu(r["hyp"], r["ref"]), abs=5e-4)
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--examples")
    assert code == 0
    assert out.split("\n")[0].startswith("go . => ") and "(reference: va !)" in out


def test_space_before_punctuation_does_not_change_scores() -> None:
    """Normalised text spaces '.', '!', '?' off; sacrebleu's 13a and chrF score it the same."""
    spaced = corpus_scores(HYPS, REFS)
    unspaced = corpus_scores([h.replace(" .", ".") for h in HYPS],
                             [[r.replace(" .", ".") for r in refs] for refs in REFS])
    assert spaced.bleu == pytest.approx(unspaced.bleu)
    assert spaced.chrf == pytest.approx(unspaced.chrf)


def test_bleu_limit_keeps_the_first_sources_in_separate_files(
    run_dir: Path, tmp_path: Path
) -> None:
    src, ref = tmp_path / "l.en", tmp_path / "l.fr"
    src.write_text("a b c\nd e\nf\n", encoding="utf-8")
    ref.write_text("c b a\ne d\nf\n", encoding="utf-8")
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                          "--limit", "2", "--json")
    assert code == 0 and json.loads(out)["sentences"] == 2
    hyps = (run_dir / "hyp.file-l.en.first2.txt").read_text(encoding="utf-8")
    assert hyps.count("\n") == 2
