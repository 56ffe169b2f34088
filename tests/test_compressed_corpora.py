"""Compressed corpora (nmt/data/compressed.py) and OPUS's Moses archives (nmt/data/corpora/opus.py):
every form read compressed gives the pairs it gives plain, the same arrays as the built-in
corpus; a damaged, cut-short, misnamed or bomb-like file is one line naming it, whatever the
damage (every byte position of every format mutated, by Hypothesis); the same for
``--input`` of ``nmt translate`` and ``nmt backtranslate``, a pipe included."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import lzma
import os
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import tiny_corpus_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config import DataConfig
from nmt.data import compressed
from nmt.data.corpora import Context, open_corpus
from nmt.data.prepare import prepare
from nmt.errors import DataError
from nmt.localisation import format_of
from nmt.translation.translator import open_input

CFG = DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1, span_augment=0.0)
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def quiet(msg: str) -> None:
    pass


def rows() -> list[tuple[str, str]]:
    return [(en, fr) for en, fr in (line.split("\t") for line in tiny_corpus_lines())]


def read(spec: str, cfg: DataConfig = CFG) -> list[tuple[str, str]]:
    return list(open_corpus(spec, Context(cfg, Path("unused"), log=quiet)).pairs())


def side_text(pairs: list[tuple[str, str]], i: int) -> bytes:
    return "".join(p[i] + "\n" for p in pairs).encode()


def opus_zip(path: Path, pairs: list[tuple[str, str]], pair: str = "en-fr",
             codes: tuple[str, str] = ("en", "fr"), name: str = "Books") -> Path:
    """An archive as OPUS's ``moses/L1-L2.txt.zip`` links give it."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("README", f"Corpus Name: {name}\nPackage: {name}.{pair} in Moses format\n")
        z.writestr("LICENSE", "terms\n")
        for i, code in enumerate(codes):
            z.writestr(f"{name}.{pair}.{code}", side_text(pairs, i))
        z.writestr(f"{name}.{pair}.xml", "<?xml version='1.0'?><cesAlign/>")
    return path


# --- the same pairs, compressed or not ------------------------------------------------------


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_every_file_form_reads_its_files_compressed(tmp_path: Path, suffix: str) -> None:
    pairs = rows()[:200]
    pack = COMPRESS[suffix]
    (tmp_path / f"train.en{suffix}").write_bytes(pack(side_text(pairs, 0)))
    (tmp_path / "train.fr").write_bytes(side_text(pairs, 1))  # one side plain: allowed
    tsv = "".join(f"{en}\t{fr}\n" for en, fr in pairs).encode()
    (tmp_path / f"pairs.tsv{suffix}").write_bytes(pack(tsv))
    (tmp_path / f"fra.txt{suffix}").write_bytes(pack(tsv))
    units = "".join(f'<tu><tuv xml:lang="en"><seg>{en}</seg></tuv>'
                    f'<tuv xml:lang="fr-FR"><seg>{fr}</seg></tuv></tu>' for en, fr in pairs)
    tmx = f'<?xml version="1.0"?><tmx version="1.4"><body>{units}</body></tmx>'
    (tmp_path / f"memory.tmx{suffix}").write_bytes(pack(tmx.encode()))
    assert read(str(tmp_path / "train")) == pairs
    tsv_cfg = dataclasses.replace(CFG, columns="en,fr")
    assert read(str(tmp_path / f"pairs.tsv{suffix}"), tsv_cfg) == pairs
    assert read(str(tmp_path / f"fra.txt{suffix}")) == pairs
    assert read(str(tmp_path / f"memory.tmx{suffix}")) == pairs
    # known by its first bytes, whatever its name
    (tmp_path / "other.tsv").write_bytes(pack(tsv))
    assert read(str(tmp_path / "other.tsv"), tsv_cfg) == pairs
    (tmp_path / "plain.tsv").write_bytes(b"BZh91 is a name\tun nom\n")  # text, whatever it starts
    assert read(str(tmp_path / "plain.tsv"), tsv_cfg) == [("BZh91 is a name", "un nom")]


_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\t"),
                max_size=30)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_LINE, _LINE), min_size=1, max_size=30), st.sampled_from(
    [*COMPRESS, ".zip"]), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_any_text_reads_the_same_compressed_or_plain(
        tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]], suffix: str,
        eol: str, bom: bool) -> None:
    """Whatever the text (any characters, CRLF, a byte-order mark), a compressed file or an
    archive's member gives the pairs the plain files give."""
    folder = tmp_path_factory.mktemp("any")
    sides = [(("\ufeff" if bom else "") + "".join(p[i] + eol for p in pairs)).encode()
             for i in (0, 1)]
    (folder / "plain.en").write_bytes(sides[0])
    (folder / "plain.fr").write_bytes(sides[1])
    if suffix == ".zip":
        with zipfile.ZipFile(folder / "en-fr.txt.zip", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("X.en-fr.en", sides[0])
            z.writestr("X.en-fr.fr", sides[1])
        spec = str(folder / "en-fr.txt.zip")
    else:
        (folder / f"packed.en{suffix}").write_bytes(COMPRESS[suffix](sides[0]))
        (folder / f"packed.fr{suffix}").write_bytes(COMPRESS[suffix](sides[1]))
        spec = str(folder / "packed")
    assert read(spec) == read(str(folder / "plain"))


def test_opus_codes_match_by_the_language_tag_rule_in_either_direction(tmp_path: Path) -> None:
    pairs = rows()[:50]
    archive = opus_zip(tmp_path / "en-pt_BR.txt.zip", pairs, "en-pt_BR", ("en", "pt_BR"))
    cfg = dataclasses.replace(CFG, source="pt-BR", target="en")
    assert read(str(archive), cfg) == [(pt, en) for en, pt in pairs]
    assert read(str(archive), dataclasses.replace(CFG, target="pt")) == pairs  # a form of pt
    with pytest.raises(DataError, match="no file in language 'pt-PT'"):
        read(str(archive), dataclasses.replace(CFG, target="pt-PT"))


def test_opus_archive_errors_are_one_line(tmp_path: Path) -> None:
    pairs = rows()[:50]
    archive = opus_zip(tmp_path / "de-en.txt.zip", pairs, "de-en", ("de", "en"))
    with pytest.raises(DataError) as e:
        read(str(archive))  # en-fr asked
    assert "no file in language 'fr'" in str(e.value) and "Books.de-en.de" in str(e.value)
    mixed = tmp_path / "mixed.zip"  # two corpora's halves
    with zipfile.ZipFile(mixed, "w") as z:
        z.writestr("A.en-fr.en", side_text(pairs, 0))
        z.writestr("B.en-fr.fr", side_text(pairs, 1))
    with pytest.raises(DataError, match="not one corpus's two sides"):
        read(str(mixed))
    short = tmp_path / "short.zip"
    with zipfile.ZipFile(short, "w") as z:
        z.writestr("A.en-fr.en", side_text(pairs, 0))
        z.writestr("A.en-fr.fr", side_text(pairs[:-1], 1))
    with pytest.raises(DataError, match=r"A\.en-fr\.fr'?: ends at line 49"):
        read(str(short))


def with_headers(path: Path, flags: int = 0, method: int | None = None) -> Path:
    """``path``'s zip with each entry's flags or compression method rewritten (its local and
    central headers), as an encrypting or Deflate64-writing tool leaves them."""
    data = bytearray(path.read_bytes())
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.find(signature)
        while i >= 0:
            data[i + at] |= flags
            if method is not None:
                data[i + at + 2: i + at + 4] = method.to_bytes(2, "little")
            i = data.find(signature, i + 4)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(("flags", "method", "said"), [
    (1, None, "a member is encrypted"),
    (0, 9, "a compression method Python's zipfile cannot read"),  # Deflate64
])
def test_an_opus_archive_python_cannot_read_says_why(tmp_path: Path, flags: int,
                                                     method: int | None, said: str) -> None:
    archive = with_headers(opus_zip(tmp_path / "en-fr.txt.zip", rows()[:20]), flags, method)
    with pytest.raises(DataError) as e:
        read(str(archive))
    assert said in str(e.value) and "\n" not in str(e.value) and str(archive) in str(e.value)


def argos_data(path: Path, pairs: list[tuple[str, str]], codes: tuple[str, str] = ("en", "fr"),
               meta: bytes | None = None) -> Path:
    """A data package as argos-train writes them: one folder, source, target, metadata.json."""
    folder = f"data-books-{codes[0]}_{codes[1]}"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{folder}/", "")
        z.writestr(f"{folder}/metadata.json", meta if meta is not None else json.dumps(
            {"name": "Books", "type": "data", "from_code": codes[0], "to_code": codes[1],
             "size": len(pairs), "reference": "someone", "links": []}))
        z.writestr(f"{folder}/source", side_text(pairs, 0))
        z.writestr(f"{folder}/target", side_text(pairs, 1))
        z.writestr(f"{folder}/README", "x")
        z.writestr(f"{folder}/LICENSE", "terms")
    return path


@pytest.mark.parametrize(("form", "name"), [("opus", "en-fr.txt.zip"),
                                           ("argos-data", "data-books-en_fr.argosdata")])
def test_an_archive_builds_what_the_builtin_corpus_builds(tiny_data_dir: Path, tmp_path: Path,
                                                          form: str, name: str) -> None:
    builtin = prepare(CFG, tiny_data_dir, log=quiet)
    archive = (opus_zip if form == "opus" else argos_data)(tmp_path / name, rows())
    p = prepare(dataclasses.replace(CFG, corpus=str(archive)), tiny_data_dir, log=quiet)
    for k in ("train", "valid", "test"):
        assert p.splits[k].src_text == builtin.splits[k].src_text
        assert p.splits[k].tgt_text == builtin.splits[k].tgt_text
    assert p.identity["corpus"]["form"] == form
    assert p.identity["corpus"]["licence"] == ""  # their terms differ by corpus: not guessed


def test_an_argos_data_package_trains_either_direction(tmp_path: Path) -> None:
    pairs = rows()[:30]
    package = argos_data(tmp_path / "p.argosdata", pairs, ("en", "pt_BR"))
    assert read(str(package), dataclasses.replace(CFG, target="pt")) == pairs
    assert read(str(package), dataclasses.replace(CFG, source="pt-BR", target="en")) == [
        (pt, en) for en, pt in pairs]
    with pytest.raises(DataError, match=r"a package of 'en' -> 'pt_BR' \(its metadata.json\), "
                                        "not 'en' and 'fr'"):
        read(str(package))


def test_an_unpacked_package_and_a_locomotive_folder_are_read_as_the_package(
        tmp_path: Path) -> None:
    pairs = rows()[:30]
    package = argos_data(tmp_path / "p.argosdata", pairs)
    with zipfile.ZipFile(package) as z:
        z.extractall(tmp_path / "unpacked")
    folder = tmp_path / "unpacked" / "data-books-en_fr"
    reverse = dataclasses.replace(CFG, source="fr", target="en")
    assert read(str(folder)) == read(str(package)) == pairs
    assert read(str(folder), reverse) == [(fr, en) for en, fr in pairs]  # by its metadata.json
    locomotive = tmp_path / "mydataset-en_fr"  # no metadata: the config's order
    locomotive.mkdir()
    (locomotive / "source.txt").write_bytes(side_text(pairs, 0))
    (locomotive / "target.txt").write_bytes(side_text(pairs, 1))
    assert read(str(locomotive)) == pairs
    (locomotive / "metadata.json").write_text('{"from_code": "en", "to_code": "de"}')
    with pytest.raises(DataError, match=r"mydataset-en_fr: a package of 'en' -> 'de'"):
        read(str(locomotive))


@pytest.mark.parametrize(("meta", "said"), [
    (b"{not json", "expected a JSON object with from_code and to_code"),
    (b'{"from_code": "en"}', "expected a JSON object with from_code and to_code"),
    (b'["en", "fr"]', "expected a JSON object with from_code and to_code"),
])
def test_a_broken_argos_data_package_is_one_line(tmp_path: Path, meta: bytes, said: str) -> None:
    package = argos_data(tmp_path / "p.argosdata", rows()[:5], meta=meta)
    with pytest.raises(DataError) as e:
        read(str(package))
    assert said in str(e.value) and "\n" not in str(e.value)
    flat = tmp_path / "flat.argosdata"  # no folder: not what argos-train writes
    with zipfile.ZipFile(flat, "w") as z:
        z.writestr("source", "a\n")
        z.writestr("target", "b\n")
    with pytest.raises(DataError, match="expected one folder holding metadata.json, source "
                                        "and target"):
        read(str(flat))
    (tmp_path / "text.argosdata").write_text("not a zip")
    with pytest.raises(DataError, match="text.argosdata: cannot read the zip archive"):
        read(str(tmp_path / "text.argosdata"))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["name", "type", "from_code", "to_code", "size",
                                        "reference", "links"]), _JSON, max_size=4),
       st.booleans())
def test_any_metadata_is_read_or_refused_in_one_line(
        tmp_path_factory: pytest.TempPathFactory, changed: dict[str, object],
        folder: bool) -> None:
    """Each field of a package's metadata.json replaced by any JSON value (in the archive and
    unpacked): the package is read, by its codes, or refused in one line naming the file."""
    where = tmp_path_factory.mktemp("meta")
    meta = {"name": "Books", "type": "data", "from_code": "en", "to_code": "fr", **changed}
    package = argos_data(where / "p.argosdata", rows()[:5], meta=json.dumps(meta).encode())
    spec = str(package)
    if folder:
        with zipfile.ZipFile(package) as z:
            z.extractall(where / "unpacked")
        spec = str(where / "unpacked" / "data-books-en_fr")
    try:
        got = read(spec)
    except DataError as e:
        assert "\n" not in str(e) and "metadata.json" in str(e), str(e)
    else:
        assert meta["from_code"] == "en" and meta["to_code"] == "fr"  # read only as en -> fr
        assert got == rows()[:5]


# --- whatever the damage: a one-line error naming the file, or the pairs --------------------


def mutations() -> st.SearchStrategy[tuple[str, int, int, bool]]:
    return st.tuples(st.sampled_from([*COMPRESS, ".zip", ".argosdata"]), st.integers(0, 10**6),
                     st.integers(1, 255), st.booleans())


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations())
def test_a_damaged_or_cut_short_file_is_one_line_naming_it(
        tmp_path_factory: pytest.TempPathFactory, mutation: tuple[str, int, int, bool]) -> None:
    suffix, where, flip, cut = mutation
    folder = tmp_path_factory.mktemp("damaged")
    pairs = rows()[:300]
    if suffix == ".zip":
        path = opus_zip(folder / "en-fr.txt.zip", pairs)
        spec = str(path)
    elif suffix == ".argosdata":
        path = argos_data(folder / "data-books-en_fr.argosdata", pairs)
        spec = str(path)
    else:
        (folder / "train.fr").write_bytes(side_text(pairs, 1))
        path = folder / f"train.en{suffix}"
        path.write_bytes(COMPRESS[suffix](side_text(pairs, 0)))
        spec = str(folder / "train")
    data = bytearray(path.read_bytes())
    where %= len(data)
    if cut:
        del data[where:]
    else:
        data[where] ^= flip
    path.write_bytes(bytes(data))
    try:
        got = read(spec)
    except DataError as e:
        message = str(e)
        assert "\n" not in message and str(path) in message, message
    else:  # a byte that does not matter (a header's time, a zip comment): the pairs as written
        assert len(got) == len(pairs) and [g[1] for g in got] == [p[1] for p in pairs]


@pytest.mark.parametrize("suffix", [*COMPRESS, ".zip", ".argosdata"])
def test_every_byte_of_a_small_file_spoiled_is_one_line_or_the_pairs(tmp_path: Path,
                                                                     suffix: str) -> None:
    """The same as above, exhaustively on a small file: each byte flipped, and the file cut
    there (a Hypothesis draw found a damaged metadata.json raising zlib.error; this finds
    such a byte every run)."""
    pairs = rows()[:4]
    if suffix == ".zip":
        path, spec = opus_zip(tmp_path / "en-fr.txt.zip", pairs), None
    elif suffix == ".argosdata":
        path, spec = argos_data(tmp_path / "p.argosdata", pairs), None
    else:
        (tmp_path / "train.fr").write_bytes(side_text(pairs, 1))
        path = tmp_path / f"train.en{suffix}"
        path.write_bytes(COMPRESS[suffix](side_text(pairs, 0)))
        spec = str(tmp_path / "train")
    intact = path.read_bytes()
    for where in range(len(intact)):
        for spoiled in (intact[:where] + bytes([intact[where] ^ 0xFF]) + intact[where + 1:],
                        intact[:where]):
            path.write_bytes(spoiled)
            try:
                got = read(spec or str(path))
            except DataError as e:
                assert "\n" not in str(e) and str(path) in str(e), (where, str(e))
            else:
                assert [g[1] for g in got] == [p[1] for p in pairs], where


def test_a_name_that_says_compressed_on_a_file_that_is_not(tmp_path: Path) -> None:
    (tmp_path / "train.en.gz").write_bytes(side_text(rows()[:5], 0))
    (tmp_path / "train.fr").write_bytes(side_text(rows()[:5], 1))
    with pytest.raises(DataError, match=r"train\.en\.gz: not gzip-compressed data, though its "
                                        r"name ends in \.gz"):
        read(str(tmp_path / "train"))


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_decompression_bomb_is_refused_and_real_text_is_not(
        tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compressed, "FREE_BYTES", 1 << 16)  # the bound, met sooner
    text = b"".join(f"{en}\t{fr}\n".encode() for en, fr in rows())  # about 200 KB of pairs
    (tmp_path / f"ok.tsv{suffix}").write_bytes(COMPRESS[suffix](text))
    tsv_cfg = dataclasses.replace(CFG, columns="en,fr")
    assert len(read(str(tmp_path / f"ok.tsv{suffix}"), tsv_cfg)) == len(rows())
    (tmp_path / f"bomb.tsv{suffix}").write_bytes(COMPRESS[suffix](b"a\tb\n" * (1 << 20)))
    with pytest.raises(DataError, match=r"bomb\.tsv.*: more than 200 times its compressed size "
                                        "once decompressed"):
        read(str(tmp_path / f"bomb.tsv{suffix}"), tsv_cfg)


def test_a_bomb_inside_an_opus_archive_is_refused(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compressed, "FREE_BYTES", 1 << 16)
    archive = tmp_path / "en-fr.txt.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("A.en-fr.en", b"a\n" * (1 << 21))
        z.writestr("A.en-fr.fr", b"b\n" * (1 << 21))
    with pytest.raises(DataError, match=r"A\.en-fr\.en'?: more than 200 times"):
        read(str(archive))


# --- --input of nmt translate and nmt backtranslate -----------------------------------------


def test_input_is_read_compressed_from_a_file_and_from_a_pipe(tmp_path: Path) -> None:
    text = b"Hello.\nI love you.\n"
    packed = tmp_path / "in.txt.xz"
    packed.write_bytes(lzma.compress(text))
    with open_input(packed, "--input") as f:
        assert f.read() == text
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as w:
            w.write(gzip.compress(text))

    writer = threading.Thread(target=write)
    writer.start()
    with open_input(fifo, "--input") as f:  # a stream: looked at, never sought
        assert f.read() == text
    writer.join()


def test_a_compressed_localisation_file_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"input .*m\.po\.gz: a compressed \.po file; "
                                        "decompress it first"):
        format_of(tmp_path / "m.po.gz", None)
    assert format_of(tmp_path / "m.txt.gz", None) == "text"
