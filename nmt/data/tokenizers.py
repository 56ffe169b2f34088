"""Tokenizers: SentencePiece (unigram or BPE, joint or per-language) and the recipe's word level.

Both map *normalised* text (:func:`nmt.data.normalize.normalize`) to ids and back, with the same
special ids everywhere: ``<unk>``=0, ``<pad>``=1, ``<bos>``=2, ``<eos>``=3 (the recipe's order).
``encode_*`` adds no ``<bos>``/``<eos>``: batching does. A tokenizer saves itself to a directory
(``tokenizer.json`` plus model or vocabulary files) and :func:`load_tokenizer` reads it back.
"""

from __future__ import annotations

import errno
import hashlib
import io
import itertools
import json
import os
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt import stoppable
from nmt.device import usable_cpus
from nmt.errors import ConfigError, DataError
from nmt.files import read_stored_bytes, read_stored_text

UNK_ID, PAD_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIALS = ("<unk>", "<pad>", "<bos>", "<eos>")  # indexed by the ids above
MIN_SENTENCEPIECE_VOCAB = len(SPECIALS) + 1  # the specials and at least one character
# SentencePiece trains on a random sample of this many sentences (its input_sentence_size):
# about 1.5 GB of the trainer's memory; 2,000,000 took 2.9 GB (docs/BENCHMARKS.md)
SENTENCEPIECE_SAMPLE = 1_000_000
# ... and of at most about this many characters: the trainer's memory grows by about 20 bytes a
# character of its sample (its suffix array), so long sentences would otherwise raise it without
# bound (a million sentences of 400 characters: 8 GB); this is about 1 GB (docs/BENCHMARKS.md)
SENTENCEPIECE_CHARACTERS = 40_000_000
# The placeholders and tags most frequent in software strings, each a piece of its own
# (data.span_pieces): never cut into pieces a model must put back together. Rarer spans are
# cut into the pieces of their characters, which byte fallback keeps (docs/DATA.md)
SPAN_PIECES = ("%s", "%d", "%i", "%u", "%f", "%x", "%c", "%ld", "%lu", "%zu", "%%",
               "%1$s", "%2$s", "%3$s", "%1$d", "%2$d", "{}", "{0}", "{1}", "{2}",
               "<b>", "</b>", "<i>", "</i>", "<br/>", "<br>", "<p>", "</p>")
# byte fallback takes 256 pieces (a piece per byte) and SPAN_PIECES theirs: a vocabulary smaller
# than this is a toy that cannot spare them, and is trained without either
MIN_FALLBACK_VOCAB = 1000
META_FILE = "tokenizer.json"
# every file a saved tokenizer may hold: its description and, by kind and jointness, the
# SentencePiece models or the word lists (what a package's run copy may unpack of it)
FILES = (META_FILE, "spm.model", "src.model", "tgt.model", "vocab.txt", "src.vocab.txt",
         "tgt.vocab.txt")


class Tokenizer(ABC):
    """What training, search and plotting need from a tokenizer."""

    kind: str
    src_vocab_size: int
    tgt_vocab_size: int
    joint: bool  # True when source and target share one vocabulary and ids
    _digest: str | None = None  # digest(), computed once

    @abstractmethod
    def encode_src(self, text: str) -> list[int]:
        """Normalised source sentence -> ids (no ``<bos>``/``<eos>``)."""

    @abstractmethod
    def encode_tgt(self, text: str) -> list[int]:
        """Normalised target sentence -> ids (no ``<bos>``/``<eos>``)."""

    @abstractmethod
    def decode_tgt(self, ids: Sequence[int]) -> str:
        """Target ids -> text; stops at the first ``<eos>``, skips ``<pad>`` and ``<bos>``."""

    @abstractmethod
    def src_tokens(self, text: str) -> list[str]:
        """The pieces (or words) of a normalised source sentence, for attention-plot labels."""

    @abstractmethod
    def tgt_tokens(self, ids: Sequence[int]) -> list[str]:
        """The piece (or word) of each target id, for attention-plot labels."""

    @abstractmethod
    def pieces(self, side: str) -> list[str]:
        """The tokens of ``side`` (``"src"`` or ``"tgt"``) in id order: what each id means."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write ``tokenizer.json`` and the model/vocabulary files into ``directory``."""

    def digest(self) -> str:
        """The identity of this tokenizer's ids: SHA-256 of its kind and of each side's tokens
        in id order. Checkpoints and exports record it, so that a model is never decoded with,
        or trained on, the ids of another tokenizer of the same size. SentencePiece's scores
        and training options are not part of it: they change how text is cut, not what an id
        means (and a model file records the number of threads it was trained with)."""
        if self._digest is None:
            sides = {"src": self.pieces("src")} if self.joint else {
                "src": self.pieces("src"), "tgt": self.pieces("tgt")}
            blob = json.dumps({"kind": self.kind, "joint": self.joint, **sides})  # ASCII
            self._digest = hashlib.sha256(blob.encode("ascii")).hexdigest()
        return self._digest

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        """Many sentences at once (SentencePiece encodes them on all cores)."""
        return [self.encode_src(t) for t in texts]

    def encode_tgt_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_tgt(t) for t in texts]


BT_TAG = "<bt>"  # starts the synthetic source of a back-translated pair (Caswell et al. 2019)


def _cut(ids: Sequence[int]) -> list[int]:
    """Ids up to the first ``<eos>``, without ``<pad>``/``<bos>``."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            out.append(i)
    return out


def _write_meta(directory: Path, meta: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


# --- word level (the recipe) -----------------------------------------------------------------


@dataclass(frozen=True)
class LineFiles:
    """Sentences in text files, one a line (``\\n`` ends a line), read when iterated: what a
    tokenizer trains on when the corpus is large. Picklable, so that a child process reads the
    files itself; ``a + b`` reads ``a``'s files, then ``b``'s."""

    paths: tuple[Path, ...]

    def __iter__(self) -> Iterator[str]:
        for path in self.paths:
            with path.open("rb") as f:
                for line in f:
                    yield line.rstrip(b"\n").decode("utf-8")

    def __add__(self, other: LineFiles) -> LineFiles:
        return LineFiles(self.paths + other.paths)


Sentences = Sequence[str] | LineFiles  # what tokenizers train on


def joined(a: Sentences, b: Sentences) -> Sentences:
    """``a``'s sentences, then ``b``'s (a joint vocabulary's training text)."""
    if isinstance(a, LineFiles) and isinstance(b, LineFiles):
        return a + b
    return [*a, *b]


def build_vocab(lines: Iterable[str], min_freq: int) -> list[str]:
    """The recipe's vocabulary: specials, then words with count >= ``min_freq`` by descending
    count, ties in first-occurrence order (a stable sort over the Counter's insertion order)."""
    counter = Counter(tok for line in lines for tok in split_words(line))
    itos = list(SPECIALS)
    seen = set(itos)
    for tok, freq in sorted(counter.items(), key=lambda x: x[1], reverse=True):
        if freq >= min_freq and tok not in seen:
            itos.append(tok)
            seen.add(tok)
    return itos


def split_words(text: str) -> list[str]:
    """The recipe's split on single spaces (``str.split()`` would also split at U+2009 and drop
    the empty words of double spaces, which the recipe keeps); ``""`` has no words."""
    return text.split(" ") if text else []


def _word_ids(stoi: dict[str, int], text: str) -> list[int]:
    """Word ids; a special token's spelling in the text ("<eos>", "<pad>") is an unknown word,
    so input cannot end or pad a sentence early (SentencePiece behaves the same)."""
    get = stoi.get
    ids = [get(t, UNK_ID) for t in split_words(text)]
    return [UNK_ID if i < len(SPECIALS) else i for i in ids]


class WordTokenizer(Tokenizer):
    """Split on single spaces; unknown words map to ``<unk>``. Detokenizing joins with spaces."""

    kind = "word"

    def __init__(self, src_itos: list[str], tgt_itos: list[str] | None = None) -> None:
        self.joint = tgt_itos is None
        self.src_itos = src_itos
        self.tgt_itos = src_itos if tgt_itos is None else tgt_itos
        self.src_stoi = {t: i for i, t in enumerate(self.src_itos)}
        self.tgt_stoi = self.src_stoi if self.joint else {t: i for i, t in enumerate(self.tgt_itos)}
        self.src_vocab_size, self.tgt_vocab_size = len(self.src_itos), len(self.tgt_itos)

    @classmethod
    def train(cls, src: Sentences, tgt: Sentences, *, min_freq: int, joint: bool
              ) -> WordTokenizer:
        if joint:
            return cls(build_vocab(itertools.chain(src, tgt), min_freq))
        return cls(build_vocab(src, min_freq), build_vocab(tgt, min_freq))

    def encode_src(self, text: str) -> list[int]:
        return _word_ids(self.src_stoi, text)

    def encode_tgt(self, text: str) -> list[int]:
        return _word_ids(self.tgt_stoi, text)

    def decode_tgt(self, ids: Sequence[int]) -> str:
        return " ".join(w for w in (self.tgt_itos[i] for i in _cut(ids)) if w != BT_TAG)

    def src_tokens(self, text: str) -> list[str]:
        return split_words(text)

    def tgt_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.tgt_itos[int(i)] for i in ids]

    def pieces(self, side: str) -> list[str]:
        return list(self.src_itos if side == "src" else self.tgt_itos)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        _write_meta(directory, {"kind": self.kind, "joint": self.joint})
        files = {"vocab.txt": self.src_itos} if self.joint else {
            "src.vocab.txt": self.src_itos, "tgt.vocab.txt": self.tgt_itos}
        for name, itos in files.items():
            (directory / name).write_text("\n".join(itos) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, meta: dict[str, Any]) -> WordTokenizer:
        def read(name: str) -> list[str]:
            itos = read_stored_text(directory / name, directory).split("\n")[:-1]
            if tuple(itos[:4]) != SPECIALS:
                raise DataError(f"{directory / name}: expected the special tokens {SPECIALS} first")
            return itos

        if meta.get("joint"):
            return cls(read("vocab.txt"))
        return cls(read("src.vocab.txt"), read("tgt.vocab.txt"))


# --- SentencePiece ---------------------------------------------------------------------------


def train_sentencepiece(
    lines: Sentences, *, vocab_size: int, model_type: str, threads: int = 0, seed: int = 1,
    what: str = "data.vocab_size", character_coverage: float = 1.0,
    user_symbols: Sequence[str] = (), sample: int = SENTENCEPIECE_SAMPLE,
    characters: int = SENTENCEPIECE_CHARACTERS, byte_fallback: bool = False,
    span_pieces: bool = False,
) -> bytes:
    """Train a SentencePiece model on normalised sentences; returns the serialized model.

    It trains on a random sample of ``sample`` sentences and about ``characters`` characters
    (:func:`training_sample`; 0: no limit), which bounds its time and memory.

    Our text is already normalised, so SentencePiece's own normaliser is switched off
    (``identity``: NFKC would rewrite characters and break ``decode(encode(x)) == x``).
    ``character_coverage=1.0`` (the default) keeps every character of the training text
    (accents, « ») instead of mapping the rarest 0.05% to ``<unk>``; Chinese and Japanese, with
    thousands of characters, need less (``data.character_coverage = 0.9995``).

    ``byte_fallback``: a character the vocabulary lacks becomes the pieces of its UTF-8 bytes
    (``<0x25>``), which decoding turns back into it, instead of ``<unk>``; ``span_pieces``:
    :data:`SPAN_PIECES` are pieces of their own. Both only for vocabularies of at least
    :data:`MIN_FALLBACK_VOCAB` pieces.
    """
    roomy = vocab_size >= MIN_FALLBACK_VOCAB
    symbols = [*user_symbols, *(SPAN_PIECES if span_pieces and roomy else ())]
    settings = dict(
        model_type=model_type,
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        normalization_rule_name="identity",
        unk_id=UNK_ID, pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        unk_piece=SPECIALS[UNK_ID], pad_piece=SPECIALS[PAD_ID],
        bos_piece=SPECIALS[BOS_ID], eos_piece=SPECIALS[EOS_ID],
        input_sentence_size=sample,  # a sample bounds time and memory on huge corpora (0: all)
        shuffle_input_sentence=True,
        num_threads=threads or usable_cpus(),
        minloglevel=2,  # no progress chatter on stderr
    )
    if byte_fallback and roomy:
        settings["byte_fallback"] = True
    if symbols:  # pieces of their own, never split (the back-translation tag, the spans')
        settings["user_defined_symbols"] = symbols
    try:  # in a child process: minutes of C++ on a large corpus, which Ctrl-C must still stop
        return stoppable.call(_train_sentencepiece, lines, settings, seed, characters,
                              what="SentencePiece training")
    except RuntimeError as e:
        msg = " ".join(str(e).split()) or type(e).__name__
        limit = re.search(r"value <= (\d+)", msg)
        if limit:
            raise ConfigError(f"{what}={vocab_size}: too large for this training text, expected "
                              f"at most {limit.group(1)}") from None
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", msg)
        if needed:  # every character of the text is a piece of its own, besides the specials
            raise ConfigError(f"{what}={vocab_size}: too small for this training text, expected "
                              f"at least {needed.group(1)} (a piece for each of its characters "
                              f"and the {len(SPECIALS)} special tokens at "
                              f"data.character_coverage={character_coverage}; or lower "
                              "data.character_coverage, 0.9995 for Chinese or Japanese)"
                              ) from None
        raise DataError(f"SentencePiece training failed: {msg}") from None


def training_sample(lines: Sentences, sentences: int, characters: int, seed: int
                    ) -> tuple[Iterable[str], int]:
    """What SentencePiece is given to train on, and the sample size it is told
    (``input_sentence_size``, 0: all it is given).

    Where its own uniform sample of ``sentences`` of them (0: all) is expected to hold at most
    ``characters`` characters (0: no limit), ``lines`` and ``sentences`` as they are: it samples
    them itself. Otherwise fewer, and 0: ``k`` sentences drawn uniformly here (seeded, in their
    order), ``k`` the most whose expected characters fit. Reads ``lines`` twice, holding none.
    """
    if characters <= 0:
        return lines, sentences
    n = total = 0
    for line in lines:
        n += 1
        total += len(line)
    taken = n if sentences <= 0 else min(n, sentences)
    if n == 0 or total * taken <= characters * n:  # expected characters of the sample: fits
        return lines, sentences
    k = max(1, characters * n // total)
    import numpy as np

    picked = np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))

    def chosen() -> Iterator[str]:
        wanted = iter(picked.tolist())
        want = next(wanted)
        for i, line in enumerate(lines):
            if i == want:
                yield line
                want = next(wanted, -1)
                if want < 0:
                    return

    return chosen(), 0


def _train_sentencepiece(lines: Sentences, settings: dict[str, Any], seed: int,
                         characters: int) -> bytes:
    import sentencepiece as spm

    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)  # the input sampling is then reproducible
    given, size = training_sample(lines, settings["input_sentence_size"], characters, seed)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(given), model_writer=model,
                                   **{**settings, "input_sentence_size": size})
    return model.getvalue()


class SentencePieceTokenizer(Tokenizer):
    """One SentencePiece model for both sides (``joint``) or one per language."""

    kind = "sentencepiece"

    def __init__(self, src_model: bytes, tgt_model: bytes | None = None) -> None:
        import sentencepiece as spm

        self.joint = tgt_model is None
        self._models = {"src": src_model} if tgt_model is None else {
            "src": src_model, "tgt": tgt_model}
        self.src_sp = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt_sp = self.src_sp if tgt_model is None else spm.SentencePieceProcessor(
            model_proto=tgt_model)
        for sp in (self.src_sp, self.tgt_sp):
            ids = (sp.unk_id(), sp.pad_id(), sp.bos_id(), sp.eos_id())
            if ids != (UNK_ID, PAD_ID, BOS_ID, EOS_ID):
                raise DataError(f"SentencePiece model has special ids {ids}, expected 0, 1, 2, 3")
        self.src_vocab_size = self.src_sp.get_piece_size()
        self.tgt_vocab_size = self.tgt_sp.get_piece_size()
        tag = self.tgt_sp.piece_to_id(BT_TAG)  # a piece of its own only where the data had it
        self._bt_tag = None if tag == self.tgt_sp.unk_id() else tag

    @classmethod
    def train(
        cls, src: Sentences, tgt: Sentences, *, vocab_size: int, model_type: str, joint: bool,
        threads: int = 0, seed: int = 1, character_coverage: float = 1.0,
        user_symbols: Sequence[str] = (), sample: int = SENTENCEPIECE_SAMPLE,
        characters: int = SENTENCEPIECE_CHARACTERS, byte_fallback: bool = False,
        span_pieces: bool = False,
    ) -> SentencePieceTokenizer:
        kw: dict[str, Any] = dict(vocab_size=vocab_size, model_type=model_type, threads=threads,
                                  seed=seed, character_coverage=character_coverage,
                                  user_symbols=user_symbols, sample=sample,
                                  characters=characters, byte_fallback=byte_fallback,
                                  span_pieces=span_pieces)
        if joint:
            return cls(train_sentencepiece(joined(src, tgt), **kw))
        return cls(train_sentencepiece(src, **kw), train_sentencepiece(tgt, **kw))

    def encode_src(self, text: str) -> list[int]:
        return list(self.src_sp.encode(text, out_type=int))

    def encode_tgt(self, text: str) -> list[int]:
        return list(self.tgt_sp.encode(text, out_type=int))

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        return list(self.src_sp.encode(texts, out_type=int)) if texts else []

    def encode_tgt_batch(self, texts: list[str]) -> list[list[int]]:
        return list(self.tgt_sp.encode(texts, out_type=int)) if texts else []

    def decode_tgt(self, ids: Sequence[int]) -> str:
        if self._bt_tag is None:
            return str(self.tgt_sp.decode(_cut(ids)))
        return str(self.tgt_sp.decode([i for i in _cut(ids) if i != self._bt_tag]))

    def src_tokens(self, text: str) -> list[str]:
        return list(self.src_sp.encode(text, out_type=str))

    def tgt_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.tgt_sp.id_to_piece(int(i)) for i in ids]

    def pieces(self, side: str) -> list[str]:
        sp = self.src_sp if side == "src" else self.tgt_sp
        return [str(piece) for piece in sp.id_to_piece(list(range(sp.get_piece_size())))]

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        _write_meta(directory, {"kind": self.kind, "joint": self.joint})
        for side, blob in self._models.items():
            (directory / f"{'spm' if self.joint else side}.model").write_bytes(blob)

    @classmethod
    def load(cls, directory: Path, meta: dict[str, Any]) -> SentencePieceTokenizer:
        paths = [directory / name for name in (
            ("spm.model",) if meta.get("joint") else ("src.model", "tgt.model"))]
        blobs = [read_stored_bytes(path, directory) for path in paths]
        for path, blob in zip(paths, blobs, strict=True):
            if not blob:
                raise DataError(f"{path}: damaged SentencePiece model (an empty file)")
        try:
            return cls(*blobs)
        except RuntimeError as e:
            raise DataError(f"{' or '.join(map(str, paths))}: damaged SentencePiece model "
                            f"({e})") from None


def load_tokenizer(directory: Path) -> Tokenizer:
    """Read a tokenizer written by :meth:`Tokenizer.save`; every file through
    :func:`nmt.files.open_stored` (a FIFO, a device or a link out of ``directory`` is refused)."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    try:
        if not os.path.lexists(meta_path):
            raise FileNotFoundError(errno.ENOENT, "missing", str(meta_path))
        meta = json.loads(read_stored_text(meta_path, directory))
        kind = meta.get("kind")
        if kind == WordTokenizer.kind:
            return WordTokenizer.load(directory, meta)
        if kind == SentencePieceTokenizer.kind:
            return SentencePieceTokenizer.load(directory, meta)
    except FileNotFoundError as e:
        raise DataError(f"{e.filename}: tokenizer file missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
        raise DataError(f"{meta_path}: not a tokenizer description ({e})") from None
    except RecursionError:
        raise DataError(f"{meta_path}: not a tokenizer description (nested too deeply)") from None
    except RuntimeError as e:  # SentencePiece cannot parse the model file
        raise DataError(f"{directory}: damaged SentencePiece model ({e})") from None
    raise DataError(f"{meta_path}: unknown tokenizer kind {kind!r}, expected word or sentencepiece")
