"""Corpus forms (nmt/data/corpora): every form of the same pairs builds the same arrays, either
direction, held-out files used as given, a form plugged in from outside the package, and every
bad input a one-line error naming the file and line, with nothing written."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import invoke, tiny_corpus_lines

from nmt.config import DataConfig, load_config
from nmt.data.corpora import FORMS, Context, Corpus, Identity, open_corpus
from nmt.data.corpora.base import Lazy
from nmt.data.languages import Language, language
from nmt.data.normalize import lower, normalize
from nmt.data.prepare import Prepared, prepare
from nmt.errors import ConfigError, DataError
from nmt.evaluate import bleu_tokenizer

CFG = DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1, span_augment=0.0)  # pairs as read


def quiet(msg: str) -> None:
    pass


def pairs() -> list[tuple[str, str]]:
    """The fake corpus' (English, French) pairs."""
    return [(en, fr) for en, fr in (line.split("\t") for line in tiny_corpus_lines())]


def write_aligned(prefix: Path, rows: list[tuple[str, str]], *, eol: str = "\n",
                  bom: bool = False) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for i, code in enumerate(("en", "fr")):
        text = ("\ufeff" if bom else "") + "".join(r[i] + eol for r in rows)
        Path(f"{prefix}.{code}").write_bytes(text.encode())


def same_arrays(a: Prepared, b: Prepared) -> None:
    for k in ("train", "valid", "test"):
        x, y = a.splits[k], b.splits[k]
        assert x.src_text == y.src_text and x.tgt_text == y.tgt_text and x.ref_text == y.ref_text
        for name in ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), (k, name)


def test_aligned_tsv_and_zip_of_the_same_pairs_build_the_same_arrays(
        tiny_data_dir: Path, tmp_path: Path) -> None:
    rows = pairs()
    builtin = prepare(CFG, tiny_data_dir, log=quiet)
    write_aligned(tmp_path / "mine" / "train", rows)
    aligned = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "mine" / "train")),
                      tiny_data_dir, log=quiet)
    tsv = tmp_path / "pairs.tsv"  # the user's own column order, and a column nobody reads
    tsv.write_text("".join(f"{fr}\tx\t{en}\n" for en, fr in rows), encoding="utf-8")
    from_tsv = prepare(dataclasses.replace(CFG, corpus=str(tsv), columns="fr,id,en"),
                       tiny_data_dir, log=quiet)
    archive = tmp_path / "fra-eng.zip"  # as ManyThings.org ships it: fra.txt at the root
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("fra.txt", "".join(f"{en}\t{fr}\tCC-BY 2.0 (France)\n" for en, fr in rows))
        z.writestr("_about.txt", "x")
    from_zip = prepare(dataclasses.replace(CFG, corpus=str(archive)), tiny_data_dir, log=quiet)
    for p in (aligned, from_tsv, from_zip):
        same_arrays(builtin, p)
    assert [p.identity["corpus"]["form"] for p in (builtin, aligned, from_tsv, from_zip)] == [
        "builtin", "aligned", "tsv", "tatoeba"]
    assert "CC-BY 2.0" in from_zip.identity["corpus"]["licence"]
    assert aligned.identity["corpus"]["licence"] == ""  # the user's files: nothing known


def test_columns_as_a_toml_list(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[data]\ncorpus = "x.tsv"\ncolumns = ["fr", "en"]\n')
    cfg = load_config(config)
    assert cfg.data.columns == "fr,en"
    assert load_config(config, ["data.columns=en,fr"]).data.columns == "en,fr"


def test_french_to_english_on_the_shipped_corpus(tiny_data_dir: Path) -> None:
    en_fr = prepare(CFG, tiny_data_dir, log=quiet)
    fr_en = prepare(dataclasses.replace(CFG, source="fr", target="en"), tiny_data_dir, log=quiet)
    assert fr_en.cache_dir != en_fr.cache_dir  # never the en->fr cache
    french = {fr for _, fr in pairs()}
    for split in fr_en.splits.values():
        assert all(s in {f.replace("\u202f", " ").replace("’", "'") for f in french} or
                   s[0].isupper() for s in split.src_text)
    assert "Je vois le chien." in {s for sp in fr_en.splits.values() for s in sp.src_text}
    assert "I see the dog." in {r for sp in fr_en.splits.values() for r in sp.ref_text}
    # grouped by the French sentence: no French source is in two splits
    sources = {k: set(s.src_text) for k, s in fr_en.splits.items()}
    assert not (sources["train"] & sources["test"] or sources["train"] & sources["valid"])
    assert fr_en.identity["corpus"]["source"] == "fr"


def test_an_edited_file_builds_a_new_cache(tiny_data_dir: Path, tmp_path: Path) -> None:
    rows = pairs()
    write_aligned(tmp_path / "train", rows)
    cfg = dataclasses.replace(CFG, corpus=str(tmp_path / "train"))
    first = prepare(cfg, tiny_data_dir, log=quiet)
    messages: list[str] = []
    assert prepare(cfg, tiny_data_dir, log=messages.append).cache_dir == first.cache_dir
    assert any(m.startswith("loaded cache") for m in messages)
    write_aligned(tmp_path / "train", rows[:-50])
    assert prepare(cfg, tiny_data_dir, log=quiet).cache_dir != first.cache_dir


def test_valid_and_test_files_are_used_as_given(tiny_data_dir: Path, tmp_path: Path) -> None:
    rows = pairs()
    write_aligned(tmp_path / "train", rows[100:])
    write_aligned(tmp_path / "test", rows[:60])
    write_aligned(tmp_path / "dev", rows[60:100] + rows[100:103])  # 3 also in training
    messages: list[str] = []
    cfg = dataclasses.replace(CFG, corpus=str(tmp_path / "train"), valid=str(tmp_path / "dev"),
                              test=str(tmp_path / "test"), max_words=4)
    p = prepare(cfg, tiny_data_dir, log=messages.append)
    # all of it, sentences over max_words included
    assert p.splits["test"].ref_text == [fr for _, fr in rows[:60]]
    assert any(len(s.split()) > 4 for s in p.splits["test"].src_text)
    assert all(len(s.split()) <= 4 for s in p.splits["train"].src_text)
    assert len(p.splits["valid"]) == 43
    # the fake corpus has sentences twice ("You" -> tu, vous): count the sources shared
    train = {en for en, _ in rows[100:] if len(en.split()) <= 4}
    for name, held in (("valid", rows[60:103]), ("test", rows[:60])):
        shared, distinct = len({en for en, _ in held} & train), len({en for en, _ in held})
        assert shared and (f"warning: {shared} of the {distinct} source sentences of "
                           f"data.{name}") in "\n".join(messages)
    assert set(p.identity) == {"corpus", "valid", "test", "cleaning"}
    assert p.identity["cleaning"]["kept"] == p.meta["counts"]["kept"]  # what the run records


class ToyForm:
    """A form from outside the package: ``toy:N`` is N pairs of counting words."""

    name = "toy"

    def claims(self, spec: str, ctx: Context) -> bool:
        return spec.startswith("toy:")

    def open(self, spec: str, ctx: Context) -> Corpus:
        n = int(spec[4:])

        def read() -> Iterator[tuple[str, str]]:
            for i in range(n):
                yield f"number {i} please", f"nombre {i} merci"

        digest = hashlib.sha256(f"toy{n}".encode()).hexdigest()
        return Lazy(Identity(self.name, spec, digest, ctx.cfg.source, ctx.cfg.target), read)


def test_a_form_plugs_in_without_editing_the_package(
        tiny_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FORMS, "toy", ToyForm())
    p = prepare(dataclasses.replace(CFG, corpus="toy:200", vocab_size=30), tiny_data_dir,
                log=quiet)
    assert sum(len(s) for s in p.splits.values()) == 200
    assert p.identity["corpus"]["form"] == "toy"
    assert "nombre 7 merci" in {t for s in p.splits.values() for t in s.tgt_text}


# --- bad data: one line naming the file and line, nothing written ---------------------------


def fails(cfg: DataConfig, data_dir: Path, *needles: str) -> str:
    before = sorted(data_dir.rglob("*"))
    with pytest.raises(DataError) as e:
        prepare(cfg, data_dir, log=quiet)
    message = str(e.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    assert sorted(data_dir.rglob("*")) == before  # no cache, half or whole
    return message


def test_aligned_files_of_different_lengths(tiny_data_dir: Path, tmp_path: Path) -> None:
    rows = pairs()[:50]
    write_aligned(tmp_path / "t", rows)
    Path(f"{tmp_path / 't'}.fr").write_text("".join(fr + "\n" for _, fr in rows[:49]))
    fails(dataclasses.replace(CFG, corpus=str(tmp_path / "t")), tiny_data_dir,
          f"{tmp_path / 't'}.fr: ends at line 49", "has 50 lines")


def test_line_separators_inside_a_line_do_not_misalign(tiny_data_dir: Path,
                                                        tmp_path: Path) -> None:
    """Only \\n ends a line: U+2028 and U+0085 (which str.splitlines splits at) stay inside."""
    rows = pairs()
    rows[20] = ("I see\u2028the dog.", "Je vois\x85le chien.")
    write_aligned(tmp_path / "t", rows)
    p = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "t")), tiny_data_dir, log=quiet)
    assert sum(len(s) for s in p.splits.values()) == p.meta["counts"]["kept"]
    assert p.meta["counts"]["read"] == len(rows)


def test_bom_and_crlf_are_accepted_silently(tiny_data_dir: Path, tmp_path: Path) -> None:
    rows = pairs()
    write_aligned(tmp_path / "plain", rows)
    write_aligned(tmp_path / "windows", rows, eol="\r\n", bom=True)
    messages: list[str] = []
    a = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "plain")), tiny_data_dir,
                log=quiet)
    b = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "windows")), tiny_data_dir,
                log=messages.append)
    same_arrays(a, b)
    assert not any("warning" in m for m in messages)


def test_tsv_line_with_one_column(tiny_data_dir: Path, tmp_path: Path) -> None:
    tsv = tmp_path / "p.tsv"
    tsv.write_text("Go.\tVa !\nno tab here\n")
    fails(dataclasses.replace(CFG, corpus=str(tsv), columns="en,fr"), tiny_data_dir,
          f"{tsv}: line 2: expected 2 tab-separated columns (en, fr), got 1")


def test_undecodable_bytes_name_the_line(tiny_data_dir: Path, tmp_path: Path) -> None:
    write_aligned(tmp_path / "t", pairs()[:10])
    Path(f"{tmp_path / 't'}.fr").write_bytes(b"Va !\nSalut !\nCaf\xe9\n" + b"x\n" * 7)
    fails(dataclasses.replace(CFG, corpus=str(tmp_path / "t")), tiny_data_dir,
          f"{tmp_path / 't'}.fr: line 3: not valid UTF-8 (byte 4 of the line); convert the file "
          "to UTF-8")


def test_empty_after_cleaning(tiny_data_dir: Path, tmp_path: Path) -> None:
    write_aligned(tmp_path / "t", [("\u200b", "x"), (" ", "y"), ("a", "")])
    fails(dataclasses.replace(CFG, corpus=str(tmp_path / "t")), tiny_data_dir,
          "no usable en-fr pairs in 3 read (3 empty after cleaning")


def test_missing_side(tiny_data_dir: Path, tmp_path: Path) -> None:
    write_aligned(tmp_path / "t", pairs()[:10])
    Path(f"{tmp_path / 't'}.fr").unlink()
    fails(dataclasses.replace(CFG, corpus=str(tmp_path / "t")), tiny_data_dir,
          f"{tmp_path / 't'}.fr: file not found", f"{tmp_path / 't'}.en is there")
    fails(dataclasses.replace(CFG, corpus=str(tmp_path / "nothing")), tiny_data_dir,
          "data.corpus = ", "none found")


def test_unknown_language_codes(tiny_data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="data.source: unknown language code 'xx'"):
        load_config(None, ["data.source=xx"])
    odd = tmp_path / "qqq.txt"  # a Tatoeba file named with a code nobody knows
    odd.write_text("Go.\tVa !\n")
    fails(dataclasses.replace(CFG, corpus=str(odd)), tiny_data_dir,
          "unknown language code 'qqq'")
    deu = tmp_path / "deu.txt"  # a known code, not the configured pair
    deu.write_text("Go.\tGeh !\n")
    fails(dataclasses.replace(CFG, corpus=str(deu)), tiny_data_dir, "holds en and de, not 'fr'")


@pytest.mark.parametrize("code", ["sr-latn", "sr_Latn", "sr-Foo", "xx-Latn", "sr-", "-Latn",
                                  "sr-Latn-RS"])
def test_a_script_after_a_language_code_is_one_of_iso_15924(code: str) -> None:
    with pytest.raises(ConfigError, match=rf"data.target: unknown language code '{code}'; "
                                          r".* such as sr-Latn \(docs/DATA.md\)$"):
        load_config(None, [f"data.target={code}"])


def test_a_language_code_with_its_script() -> None:
    cfg = load_config(None, ["data.target=sr-Latn"])
    assert cfg.data.target == "sr-Latn"
    assert language("sr-Latn") == Language("sr-Latn", "Serbian (Latin)", "Latin")
    assert language("zh-Hant").name == "Chinese (Traditional)"
    assert language("zh-Hant").spaced is False and language("uz-Cyrl").has_case
    assert bleu_tokenizer("zh-Hant") == bleu_tokenizer("zh") == ("zh", "")
    assert bleu_tokenizer("sr-Latn") == ("13a", "")
    assert load_config(None, ["data.target=sr", "data.source=sr-Latn"]).data.source == "sr-Latn"
    # the language's own rules hold in any script it is named with
    assert lower("IŞIK", "az-Latn") == lower("IŞIK", "az") == "ışık" != lower("IŞIK", "sr-Latn")
    assert normalize("«Oui»", False, "full", "fr-Latn") == normalize("«Oui»", False, "full", "fr")
    assert normalize("«Oui»", False, "full", "fr-Latn") != normalize("«Oui»", False, "full", "de")


def test_same_language_on_both_sides_and_word_tokenizer_for_chinese() -> None:
    with pytest.raises(ConfigError, match="expected two languages, got 'en' on both sides"):
        load_config(None, ["data.target=en"])
    with pytest.raises(ConfigError, match="data.tokenizer: the word tokenizer splits at spaces"):
        load_config(None, ["data.target=zh", "data.tokenizer=word"])
    with pytest.raises(ConfigError, match="data.columns: no column 'fr'"):
        load_config(None, ["data.columns=en,de"])


def test_max_words_counts_characters_without_spaces_as_words_of_their_length() -> None:
    from nmt.data.cleaning import length_in_words
    from nmt.data.languages import language

    assert length_in_words("我 喜欢猫。", language("zh")) == 3  # 4 characters, 1.7 a word
    assert length_in_words("I like cats .", language("en")) == 3  # "." is no word
    assert length_in_words("ユーザー名 PAM", language("ja")) == 3  # 5 characters, 3 a word


# --- downloads of a Tatoeba pair ----------------------------------------------------------


def test_pair_name_from_a_mirror_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           no_network: None) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / "deu-eng.zip", "w") as z:
        z.writestr("deu.txt", "".join(f"{en}\t{en.upper()} (de)\n" for en, _ in pairs()))
    monkeypatch.setenv("NMT_DATA_MIRROR", str(mirror))
    cfg = dataclasses.replace(CFG, corpus="deu-eng", source="de", target="en",
                              langid=False)  # its "German" is English in capitals
    p = prepare(cfg, tmp_path / "data", log=quiet)
    assert (tmp_path / "data" / "deu-eng" / "deu.txt").is_file()
    assert p.identity["corpus"]["source"] == "de" and "CC-BY" in p.identity["corpus"]["licence"]
    monkeypatch.delenv("NMT_DATA_MIRROR")  # offline, no copy: one line saying what to do
    with pytest.raises(DataError, match="spa-eng.zip.*NMT_DATA_MIRROR.*a spa-eng.zip"):
        prepare(dataclasses.replace(cfg, corpus="spa-eng", source="es"), tmp_path / "d",
                log=quiet)


# --- a run records its data; nmt bleu scores it on that data only ---------------------------


def test_bleu_refuses_a_split_of_other_data(tiny_data_dir: Path, tmp_path: Path) -> None:
    from nmt.runs.records import check_same_data, write_corpus_record

    p = prepare(CFG, tiny_data_dir, log=quiet)
    write_corpus_record(tmp_path, p.identity)
    check_same_data(tmp_path, p.identity, "test")  # the same data: fine
    write_aligned(tmp_path / "other", pairs()[:300])
    other = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "other")), tiny_data_dir,
                    log=quiet)
    with pytest.raises(DataError, match="was trained on fra-eng .*but the data prepared now"):
        check_same_data(tmp_path, other.identity, "test")
    check_same_data(tmp_path / "old-run", other.identity, "test")  # no record: not checked


# --- training, decoding and scoring in other scripts -----------------------------------------

NUMBERS = {
    "ru": ["один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь"],
    "zh": ["一", "二", "三", "四", "五", "六", "七", "八"],
}
THINGS = {"ru": [("dog", "собака"), ("cat", "кошка"), ("book", "книга"), ("house", "дом")],
          "zh": [("dog", "狗"), ("cat", "猫"), ("book", "书"), ("house", "房子")]}
EN = ["one", "two", "three", "four", "five", "six", "seven", "eight"]


def script_corpus(prefix: Path, lang: str) -> None:
    rows = []
    for i, n in enumerate(NUMBERS[lang]):
        for en, word in THINGS[lang]:
            other = f"{n}{word}。" if lang == "zh" else f"{n.capitalize()} {word}."
            rows.append((f"{EN[i].capitalize()} {en}.", other))
    for code, side in (("en", 0), (lang, 1)):
        Path(f"{prefix}.{code}").write_text("".join(r[side] + "\n" for r in rows * 3))


@pytest.mark.slow  # 25-40 s on a busy 2-core machine: training, decoding and scoring twice
@pytest.mark.parametrize(("lang", "vocab", "tok"), [("ru", 55, "tok:13a"), ("zh", 48, "tok:zh")])
def test_other_scripts_train_decode_and_score(tmp_path: Path, lang: str, vocab: int,
                                              tok: str) -> None:
    script_corpus(tmp_path / "train", lang)
    runs = tmp_path / "runs"
    code, out, err = invoke(
        "train", "--config", "configs/demo.toml", "--runs-dir", str(runs), "--run-name", lang,
        "--data-dir", str(tmp_path / "data"),
        "--set", f"data.corpus={tmp_path / 'train'}", "--set", f"data.target={lang}",
        "--set", f"data.vocab_size={vocab}", "--set", "data.character_coverage=0.98",
        "--set", "data.valid_frac=0.1", "--set", "data.test_frac=0.1",
        "--set", "model.d_model=16", "--set", "model.d_ff=32", "--set", "model.n_heads=2",
        "--set", "model.n_layers=1", "--set", "train.max_steps=20", "--set", "train.epochs=0",
        "--set", "train.batch_size=16", "--set", "train.device=cpu",
        "--set", "train.eval_sentences=4", "--set", "train.eval_every=10",
        "--set", "train.warmup_steps=5")
    assert code == 0, err
    code, out, err = invoke("translate", "--run", str(runs / lang), "One dog.")
    assert code == 0 and len(out.splitlines()) == 1, err
    code, out, err = invoke("bleu", "--run", str(runs / lang), "--data-dir",
                            str(tmp_path / "data"))
    assert code == 0, err
    assert tok in out
    code, out, err = invoke("bleu", "--run", str(runs / lang), "--examples")
    assert code == 1 and "check sentences are English and French" in err


@pytest.mark.slow  # about 50 s: 25 epochs of a tiny model
def test_french_to_english_learns_to_translate_french(tiny_data_dir: Path,
                                                       tmp_path: Path) -> None:
    """Turned around, the shipped corpus (here its fake slice) teaches French to English: a tiny
    model's test BLEU and its English output, not one exact sentence (floating point differs
    between machines)."""
    runs = tmp_path / "runs"
    config = tmp_path / "fr-en.toml"
    config.write_text('[data]\nsource = "fr"\ntarget = "en"\n[model]\narch = "transformer"\n')
    code, out, err = invoke(
        "train", "--config", str(config), "--runs-dir", str(runs), "--run-name", "fr-en",
        "--set", "data.vocab_size=80", "--set", "data.valid_frac=0.1",
        "--set", "data.test_frac=0.1", "--set", "model.d_model=32", "--set", "model.d_ff=64",
        "--set", "model.n_layers=1", "--set", "train.epochs=25", "--set", "train.batch_size=32",
        "--set", "train.device=cpu", "--set", "train.eval_sentences=0",
        "--set", "model.dropout=0")
    assert code == 0, err
    code, out, err = invoke("translate", "--run", str(runs / "fr-en"), "Je vois le chien.",
                            "Nous mangeons la pomme.")
    assert code == 0, err
    english = {w.strip(".").lower() for line in out.splitlines() for w in line.split()}
    assert {"the", "dog"} <= english or {"the", "apple"} <= english, out
    code, out, err = invoke("bleu", "--run", str(runs / "fr-en"), "--json")
    assert code == 0, err
    import json

    assert json.loads(out)["multi"]["bleu"] > 30
    assert json.loads((runs / "fr-en" / "corpus.json").read_text())["corpus"]["source"] == "fr"


@pytest.mark.parametrize("form", ["aligned", "tsv"])
@pytest.mark.parametrize("side", [0, 1])
def test_a_line_longer_than_the_bound_drops_its_pair_and_is_said_once(
        form: str, side: int, tmp_path: Path) -> None:
    """Every corpus form reads a line up to MAX_LINE_BYTES: longer ones (two here, one exactly at
    the bound kept) drop their pairs, the other lines stay aligned, one warning names the file,
    the count and the first line."""
    from nmt.data.corpora.base import MAX_LINE_BYTES

    rows = pairs()[:40]
    long = "a" * (MAX_LINE_BYTES + 1)
    rest = len(f"\t{rows[30][1]}".encode()) if form == "tsv" else 0  # a TSV line holds both
    at_bound = "b" * (MAX_LINE_BYTES - rest)
    rows[7] = (long, rows[7][1]) if side == 0 else (rows[7][0], long)
    rows[20] = (long, rows[20][1]) if side == 0 else (rows[20][0], long)
    rows[30] = (at_bound, rows[30][1])
    if form == "aligned":
        write_aligned(tmp_path / "t", rows)
        spec, where = str(tmp_path / "t"), f"{tmp_path / 't'}.{('en', 'fr')[side]}"
    else:
        (tmp_path / "t.tsv").write_text("".join(f"{e}\t{f}\n" for e, f in rows))
        spec, where = str(tmp_path / "t.tsv"), str(tmp_path / "t.tsv")
    logged: list[str] = []
    cfg = dataclasses.replace(CFG, corpus=spec, columns="" if form == "aligned" else "en,fr")
    ctx = Context(cfg, tmp_path / "data", log=logged.append)
    read = list(open_corpus(spec, ctx).pairs())
    expected = [r for i, r in enumerate(rows) if i not in (7, 20)]
    assert [p for i, p in enumerate(read) if i not in (7, 20)] == expected
    assert sorted(i for i, (e, f) in enumerate(read) if not e or not f) == [7, 20]
    warnings = [m for m in logged if "longer than" in m]
    assert warnings == [f"warning: {where}: 2 lines longer than 1 MiB (first: line 8) read as "
                        "empty: their pairs are dropped"]


@pytest.mark.parametrize("setting", ["kept", "straight"])
def test_target_apostrophes_are_kept_as_the_corpus_writes_them(setting: str, tiny_data_dir: Path,
                                                               tmp_path: Path) -> None:
    """A corpus written with typographic apostrophes: the model learns to answer in that style
    (the references' own), while its input reads alike however it is typed."""
    curly = [(e.replace("'", "\u2019"), f.replace("'", "\u2019")) for e, f in pairs()]
    curly += [(f"I\u2019m number {i}.", f"Je suis le num\u00e9ro {i}.") for i in range(30)]
    assert sum("\u2019" in f for _, f in curly) > 10
    write_aligned(tmp_path / "t", curly)
    cfg = dataclasses.replace(CFG, corpus=str(tmp_path / "t"), target_apostrophes=setting,
                              vocab_size=96)
    p = prepare(cfg, tiny_data_dir, log=quiet)
    sources = [s for split in p.splits.values() for s in split.src_text]
    targets = [t for split in p.splits.values() for t in split.tgt_text]
    assert not any("\u2019" in s for s in sources)
    if setting == "kept":
        assert any("\u2019" in t for t in targets) and not any("'" in t for t in targets)
    else:
        assert not any("\u2019" in t for t in targets) and any("'" in t for t in targets)


def test_runs_saved_before_the_setting_straighten_target_apostrophes() -> None:
    from nmt.config import from_dict

    assert DataConfig().target_apostrophes == "kept"
    assert from_dict({"data": {}}, saved=True).data.target_apostrophes == "straight"
