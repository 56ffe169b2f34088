"""Preparation streams: the spool, the split numbering by hash, the arrays written a chunk at a
time and memory-mapped back, and a corpus larger than a memory limit prepared under it."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import deadline, reseal_cache
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_split import grouped_split

import nmt.data.cache
import nmt.data.hash_buckets
import nmt.data.spool
from nmt.config import DataConfig
from nmt.data.cache import NpyWriter, SplitWriter, TextFile, load_cache
from nmt.data.hash_buckets import HashBuckets
from nmt.data.prepare import prepare
from nmt.data.split import first_seen, split_spool
from nmt.data.spool import NONE, SPLIT_CODES, PairSpool, text_hash
from nmt.data.tokenizers import WordTokenizer

ROOT = Path(__file__).resolve().parent.parent
# any text a corpus line can hold: no line end, the rest of Unicode (a lone \r, tabs, U+2028)
LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"),
               max_size=30)


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "", "é"]), max_size=40))
def test_first_seen_numbers_keys_in_the_order_they_first_occur(keys: list[str]) -> None:
    numbers: dict[str, int] = {}
    expected = [numbers.setdefault(k, len(numbers)) for k in keys]
    ids, n = first_seen(np.array(keys, dtype=object) if keys else np.zeros(0))
    assert ids.tolist() == expected and n == len(numbers)
    hashed, m = first_seen(np.array([text_hash(k) for k in keys], np.int64))
    assert hashed.tolist() == expected and m == n  # hashes group as the text does


# tiny_buckets only sets constants, the same for every example
FIXTURE = [HealthCheck.function_scoped_fixture]


@pytest.fixture
def tiny_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets of 4 records, columns read 5 values and indices 3 at a time, a mark every 2
    pairs: a small corpus takes every path a large one does."""
    monkeypatch.setattr(nmt.data.hash_buckets, "BUCKET_RECORDS", 4)
    monkeypatch.setattr(nmt.data.hash_buckets, "CHUNK", 5)
    monkeypatch.setattr(nmt.data.spool, "INDEX_CHUNK", 3)
    monkeypatch.setattr(nmt.data.spool, "MARK_EVERY", 2)


def every_index(spool: PairSpool, split: str | None = None) -> list[int]:
    return [i for chunk in spool.indices(split) for i in chunk.tolist()]


@settings(max_examples=30, deadline=None, suppress_health_check=FIXTURE)
@given(st.lists(st.tuples(LINE, LINE, LINE), max_size=30), st.randoms(use_true_random=False),
       st.integers(0, 30))
def test_the_spool_gives_back_every_pair_in_any_order(
        tiny_buckets: None, pairs: list[tuple[str, str, str]], rng: random.Random,
        start: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        spool = PairSpool(Path(tmp) / "spool")
        for p in pairs:
            spool.add(*p)
        order = list(range(len(pairs))) * 2
        rng.shuffle(order)
        assert list(spool.read(order)) == [pairs[i] for i in order]
        assert list(spool.read(range(len(pairs)))) == pairs
        start = min(start, len(pairs))
        marked = spool.mark_duplicates(start)
        firsts: dict[tuple[str, str], int] = {}
        for i, (s, t, _) in enumerate(pairs):
            firsts.setdefault((s, t), i)
        kept = [i for i, (s, t, _) in enumerate(pairs) if i < start or firsts[s, t] == i]
        assert every_index(spool) == kept
        assert marked == len(pairs) - len(kept)
        spool.close()


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE)
@given(st.lists(st.tuples(st.sampled_from("abcdefghij"), st.sampled_from("xyz")), max_size=60),
       st.floats(0, 0.4), st.floats(0, 0.4), st.integers(0, 3), st.integers(0, 3),
       st.integers(0, 2**32))
def test_the_split_on_disk_is_the_split_in_memory(
        tiny_buckets: None, pairs: list[tuple[str, str]], valid: float, test: float,
        valid_size: int, test_size: int, seed: int) -> None:
    """split_spool (hashes a bucket at a time on disk) gives every pair that is not a
    duplicate the split grouped_split gives it from the list of their sources; duplicates get
    none."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        spool = PairSpool(Path(tmp) / "spool")
        for s, t in pairs:
            spool.add(s, t, t)
        spool.mark_duplicates()
        kept = every_index(spool)
        split_spool(spool, valid, test, seed, valid_size, test_size)
        expected = grouped_split([pairs[i][0] for i in kept], valid, test, seed, valid_size,
                                 test_size)
        for name, positions in expected.items():
            assert every_index(spool, name) == [kept[k] for k in positions.tolist()]
        duplicate, split = spool.duplicate, spool.split
        assert all(duplicate[i] and split[i] == NONE for i in set(range(len(pairs))) - set(kept))
        assert all(not duplicate[i] and split[i] in SPLIT_CODES.values() for i in kept)
        spool.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(-2**63, 2**63 - 1) | st.sampled_from([0, 1, -1, 2**62]),
                         max_size=12), max_size=5), st.integers(1, 40))
def test_hash_buckets_give_back_every_record_with_its_equals(
        tmp_path_factory: pytest.TempPathFactory, chunks: list[list[int]],
        expected: int) -> None:
    """Every record comes back once; a bucket keeps its records in the order they were added;
    equal hashes share a bucket; more records expected, more buckets."""
    directory = tmp_path_factory.mktemp("b") / "buckets"
    added = [(h, i) for i, h in enumerate(h for c in chunks for h in c)]
    with HashBuckets(directory, expected, bucket_records=4) as buckets:
        assert len(buckets._files) == 1 << buckets.bits >= expected / 4
        at = 0
        for chunk in chunks:
            buckets.add(np.array(chunk, np.int64), np.arange(at, at + len(chunk)))
            at += len(chunk)
        for _ in range(2):  # read back as often as wanted
            seen, home = [], {}
            for k, (hashes, indices) in enumerate(buckets.buckets()):
                assert indices.tolist() == sorted(indices.tolist())
                seen += list(zip(hashes.tolist(), indices.tolist(), strict=True))
                for h in hashes.tolist():
                    assert home.setdefault(h, k) == k
            assert sorted(seen, key=lambda r: r[1]) == added
    assert not directory.exists()


def test_finding_duplicates_and_splitting_take_memory_of_a_bucket_not_of_the_corpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's allocations (numpy's included) at their peak while duplicates are marked and
    the split drawn on 300,000 pairs: a byte a pair and five bytes a distinct source,
    plus a bucket's worth, where sorting every hash in memory took tens of bytes a pair."""
    import tracemalloc

    monkeypatch.setattr(nmt.data.hash_buckets, "BUCKET_RECORDS", 1 << 14)
    monkeypatch.setattr(nmt.data.hash_buckets, "CHUNK", 1 << 14)
    n = 300_000
    spool = PairSpool(tmp_path / "spool")
    for i in range(n):
        spool.add(f"s{i % 250_000 // 2}", f"t{i % 250_000}", "")  # duplicates, shared sources
    tracemalloc.start()
    try:
        assert spool.mark_duplicates() == n - 250_000
        split_spool(spool, 0.01, 0.01, 0, 1000, 1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    spool.close()
    assert peak < 6 * n + 4 * 2**20, f"{peak / 2**20:.1f} MB"
    # 1,000 sources each, two pairs a source
    assert [sum(map(len, spool.indices(k))) for k in ("valid", "test")] == [2000, 2000]


@given(st.lists(st.lists(st.integers(-2**31, 2**31 - 1), max_size=20), max_size=6))
def test_an_array_written_in_chunks_is_the_array_saved_at_once(chunks: list[list[int]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        writer = NpyWriter(Path(tmp) / "a.npy", np.int32)
        for chunk in chunks:
            writer.append(np.array(chunk, np.int32))
        writer.close()
        whole = np.array([x for c in chunks for x in c], np.int32)
        np.save(Path(tmp) / "b.npy", whole)
        assert (Path(tmp) / "a.npy").read_bytes() == (Path(tmp) / "b.npy").read_bytes()


def test_a_split_encoded_a_chunk_at_a_time_is_the_split_encoded_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    words = ["go", "now", "je", "vais", "très", "bien", "\u2028", "x\r"]
    pairs = [(" ".join(rng.choices(words, k=rng.randint(0, 6))),
              " ".join(rng.choices(words, k=rng.randint(1, 6))), f"ref {i}") for i in range(50)]
    tok = WordTokenizer.train([s for s, _, _ in pairs], [t for _, t, _ in pairs], min_freq=1,
                              joint=True)
    arrays = {}
    for chunk in (7, 1000):
        monkeypatch.setattr(nmt.data.cache, "ENCODE_CHUNK", chunk)
        (tmp_path / str(chunk)).mkdir()
        writer = SplitWriter(tmp_path / str(chunk), "train", tok)
        for p in pairs:
            writer.add(*p)
        writer.close()
        arrays[chunk] = [np.load(tmp_path / str(chunk) / f"train.{a}.npy")
                         for a in ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")]
        text = TextFile(tmp_path / str(chunk) / "train.ref.txt", len(pairs))
        assert list(text) == [r for _, _, r in pairs]
        assert writer.distinct() == len({s for s, _, _ in pairs})
    for a, b in zip(arrays[7], arrays[1000], strict=True):
        assert np.array_equal(a, b)
    src_ids, src_offsets = arrays[7][:2]
    assert [src_ids[src_offsets[i]:src_offsets[i + 1]].tolist() for i in range(len(pairs))] == [
        tok.encode_src(s) for s, _, _ in pairs]


def test_a_cache_is_read_memory_mapped_and_its_text_when_iterated(
        tiny_data_dir: Path, tiny_data_config: DataConfig) -> None:
    first = prepare(tiny_data_config, tiny_data_dir, log=lambda m: None)
    loaded = load_cache(first.cache_dir)
    train = loaded.splits["train"]
    assert isinstance(train.src_ids, np.memmap) and isinstance(train.tgt_offsets, np.memmap)
    assert isinstance(train.src_text, TextFile) and len(train.src_text) == len(train)
    assert list(train.src_text)[5] == train.src_text[5]


def test_a_damaged_text_file_is_one_line_naming_it(
        tiny_data_dir: Path, tiny_data_config: DataConfig) -> None:
    from nmt.errors import DataError

    cache = prepare(tiny_data_config, tiny_data_dir, log=lambda m: None).cache_dir
    path = cache / "valid.src.txt"
    path.write_bytes(path.read_bytes()[:-20])
    reseal_cache(cache)  # past the digests: the line count is checked when the text is read
    with pytest.raises(DataError, match=r"valid\.src\.txt: expected [\d,]+ lines"):
        list(load_cache(cache).splits["valid"].src_text)
    loaded = load_cache(cache)
    (cache / "test.ref.txt").write_bytes(b"\xff\n" * len(loaded.splits["test"]))
    with pytest.raises(DataError, match=r"test\.ref\.txt: cannot read \(not UTF-8"):
        list(loaded.splits["test"].ref_text)
    (cache / "test.src.txt").unlink()  # the cache removed while a run reads it
    with pytest.raises(DataError, match=r"test\.src\.txt: cannot read \(.*--rebuild\)"):
        loaded.splits["test"].grouped()


LIMIT_MB = 256  # the data segment nmt data prepare gets (RLIMIT_DATA)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA is Linux's")
def test_a_corpus_larger_than_the_memory_limit_prepares_under_it(tmp_path: Path) -> None:
    """60,000 pairs of long lines (51 MB of text) prepare under a 256 MB data-segment limit
    (private memory: the heap, anonymous maps, not the file pages a process reads). Reading the
    corpus whole, as preparation did before it streamed, fails at once under this limit with a
    MemoryError (checked by hand against commit db9d493)."""
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(3000)]
    with open(tmp_path / "big.en", "w") as en, open(tmp_path / "big.fr", "w") as fr:
        for i in range(60_000):
            k = rng.randint(50, 100)
            en.write(" ".join(rng.choices(vocab, k=k)) + f" {i}.\n")
            fr.write(" ".join(rng.choices(vocab, k=k)).upper() + f" {i}.\n")
    assert (tmp_path / "big.en").stat().st_size > 24 * 2**20  # and as much in big.fr
    script = ("import resource, runpy, sys\n"
              "if __name__ == '__main__':\n"
              f"    limit = {LIMIT_MB} * 2**20\n"
              "    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))\n"
              "    sys.argv = ['nmt', *sys.argv[1:]]\n"
              "    runpy.run_module('nmt', run_name='__main__')\n")
    (tmp_path / "limited.py").write_text(script)
    settings = ["data.corpus=" + str(tmp_path / "big"), "data.tokenizer=word",
                "data.filters=none", "data.langid=false", "data.max_words=200"]
    child = subprocess.run(
        [sys.executable, str(tmp_path / "limited.py"), "data", "prepare", "--data-dir",
         str(tmp_path / "data"), *[a for s in settings for a in ("--set", s)]],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.returncode == 0, child.stderr[-2000:]
    assert "read 60,000 pairs; kept 60,000 pairs" in child.stdout + child.stderr


class DiesInAWorker:
    """Rules whose verdict ends the worker process judging it, as the kernel's OOM killer
    would."""

    def verdicts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        import multiprocessing

        if multiprocessing.parent_process() is not None:
            os._exit(9)
        return [s for s, _ in pairs]


def test_a_worker_that_dies_is_one_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    import nmt.data.parallel_pairs as parallel
    from nmt.errors import DataError

    monkeypatch.setattr(parallel, "SERIAL_PAIRS", 10)
    monkeypatch.setattr(parallel, "CHUNK", 16)
    pairs = (("a", "b") for _ in range(500))

    # a hang fails the test instead of the suite
    with deadline(60, "judged_pairs, a worker dead"), pytest.raises(
            DataError, match="a worker process judging pairs ended abruptly"):
        list(parallel.judged_pairs(DiesInAWorker(), pairs, workers=2))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), start=st.integers(0, 320), length=st.integers(0, 320),
       dtype=st.sampled_from(["int32", "int64"]))
def test_the_cache_check_reads_parts_of_arrays_as_they_are(
        tmp_path_factory: pytest.TempPathFactory, n: int, start: int, length: int,
        dtype: str) -> None:
    """The cache check reads a memory-mapped array's parts from its file (so that checking a
    large cache leaves its pages out of the process' resident memory): the same values as
    slicing, for a mapped array, a view of one and a plain one."""
    from nmt.data.cache import _part

    values = np.arange(n, dtype=dtype) * 7 - 3
    path = tmp_path_factory.mktemp("part") / "a.npy"
    np.save(path, values)
    mapped = np.load(path, mmap_mode="r")
    for array in (mapped, mapped[n // 3:], values):
        want = np.asarray(array[start:start + length])
        got = _part(array, start, start + length)
        assert got.dtype == array.dtype and np.array_equal(got, want)
        assert not isinstance(got, np.memmap)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")
def test_checking_a_cache_leaves_its_ids_out_of_resident_memory(tmp_path: Path) -> None:
    """Every id of a loaded cache is checked against the vocabulary, but through reads of its
    files, not its mapping: the process' file-backed resident memory grows by far less than
    the 64 MB of ids checked (it grew by all of them when the check read the mapping)."""
    from nmt.data.cache import Split, _check_split

    def rss_file_kb() -> int:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines()
                        if line.startswith("RssFile:")))

    pairs, per = 1 << 20, 8  # 8 M ids a side
    tok = WordTokenizer([*("<unk>", "<pad>", "<bos>", "<eos>"), *(f"w{i}" for i in range(60))])
    for side in ("src", "tgt"):
        np.save(tmp_path / f"{side}_ids.npy", np.full(pairs * per, 9, dtype=np.int32))
        np.save(tmp_path / f"{side}_offsets.npy", np.arange(pairs + 1, dtype=np.int64) * per)
    arrays = {k: np.load(tmp_path / f"{k}.npy", mmap_mode="r")
              for k in ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")}
    split = Split("train", arrays["src_ids"], arrays["src_offsets"], arrays["tgt_ids"],
                  arrays["tgt_offsets"], [], [], [])
    before = rss_file_kb()
    _check_split(tmp_path, split, pairs, tok)
    assert rss_file_kb() - before < 16 * 1024  # KB; the ids alone are 64 MB
