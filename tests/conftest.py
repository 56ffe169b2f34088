"""Shared fixtures: a small fake fra-eng corpus, zipped and already "downloaded".

The corpus is built from templates (subject x verb x noun phrase), so it is deterministic,
needs no network, and has what the real one has: several French references for many English
sentences ("you" -> tu/vous, "they" -> ils/elles), exact duplicates, U+202F before "!", curly
apostrophes, guillemets and capitals. About 1,000 lines, 700 distinct English sentences.

- ``tiny_corpus_zip``: the ``fra-eng.zip`` (``fra-eng/fra.txt`` + ``fra-eng/_about.txt``).
- ``tiny_corpus_sha256``: the SHA-256 of its ``fra.txt``.
- ``tiny_data_dir``: a fresh data directory with the corpus extracted; ``NMT_CORPUS_SHA256`` and
  ``NMT_DATA_DIR`` point at it for the test, so ``prepare(cfg, tiny_data_dir)``, the CLI and
  ``ensure_corpus`` accept it without a download.
- ``tiny_data_config``: a :class:`DataConfig` that suits it (SentencePiece, 10%/10% held out).
- ``no_network``: downloads fail as if offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

# Whether this CPU trains in bf16 (train.precision = "auto") is the machine's; the suite runs
# alike on every machine in fp32 (tests of the choice set it themselves). Children inherit it.
os.environ.setdefault("NMT_CPU_BF16", "0")

from nmt.config import DataConfig  # noqa: E402
from nmt.models.base import EncoderDecoder, Memory


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """Tiny test models run fastest on one thread; a second one only adds contention (badly
    so on a busy CPU). Per test, because code under test may set its own thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

@pytest.fixture()
def cpu_bf16(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """``cpu_bf16("1")`` / ``("0")``: what :func:`nmt.device.cpu_bf16_units` answers, through
    ``NMT_CPU_BF16``; ``(None)``: the CPU's flags decide. Its cached answer is dropped at each
    call and after the test."""
    import nmt.device

    def set_units(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("NMT_CPU_BF16", raising=False)
        else:
            monkeypatch.setenv("NMT_CPU_BF16", value)
        nmt.device.cpu_bf16_units.cache_clear()

    yield set_units
    nmt.device.cpu_bf16_units.cache_clear()


def step_by_step_logits(model: EncoderDecoder, memory: Memory, tgt: torch.Tensor) -> torch.Tensor:
    """The logits of ``tgt`` ``(B, T)`` decoded one position at a time through the incremental
    state: what the teacher-forced pass ``decode(tgt, memory)`` must equal."""
    state = model.init_state(memory)
    steps = []
    for t in range(tgt.shape[1]):
        out = model.decode(tgt[:, t : t + 1], memory, state)
        assert out.state is not None
        state = out.state
        steps.append(out.logits)
    return torch.cat(steps, dim=1)


SUBJECTS = [  # English, French forms (several = several references), verb person index
    ("I", ["je"], 0), ("You", ["tu", "vous"], 1), ("He", ["il"], 2), ("She", ["elle"], 2),
    ("We", ["nous"], 3), ("They", ["ils", "elles"], 5),
]
VERBS = [  # English base form, French conjugation by person (je, tu, il, nous, vous, ils)
    ("see", ["vois", "vois", "voit", "voyons", "voyez", "voient"]),
    ("like", ["aime", "aimes", "aime", "aimons", "aimez", "aiment"]),
    ("want", ["veux", "veux", "veut", "voulons", "voulez", "veulent"]),
    ("have", ["ai", "as", "a", "avons", "avez", "ont"]),
    ("eat", ["mange", "manges", "mange", "mangeons", "mangez", "mangent"]),
]
NOUNS = [("dog", "chien", "m"), ("cat", "chat", "m"), ("book", "livre", "m"),
         ("cake", "gâteau", "m"), ("house", "maison", "f"), ("car", "voiture", "f"),
         ("apple", "pomme", "f"), ("key", "clé", "f")]
ADJECTIVES = [("", "", ""), ("big", "grand", "grande"), ("small", "petit", "petite")]
EXTRA = [  # the corpus' oddities, verbatim
    "Go.\tVa !", "Hi.\tSalut !", "Run!\tCours\u202f!", "Run!\tCourez\u202f!", "Wait!\tAttends !",
    "I won.\tJ’ai gagné.", "I won.\tJ'ai gagné.", "Say please.\tDis : « s'il te plaît ».",
    "No means no.\t« Non », ça veut dire « non ».", "Go.\tVa !",
]


def _french(subj: str, person: int, verb: list[str], noun: tuple[str, str, str],
            adj: tuple[str, str, str]) -> str:
    form = verb[4 if subj == "vous" else person]
    if subj == "je" and form[0] in "aeiou":
        subject = "J'"
    else:
        subject = subj.capitalize() + " "
    article = "le" if noun[2] == "m" else "la"
    adjective = (adj[1] if noun[2] == "m" else adj[2]) + " " if adj[1] else ""
    return f"{subject}{form} {article} {adjective}{noun[1]}."


def tiny_corpus_lines() -> list[str]:
    """``English<TAB>French`` lines of the fake corpus, in a fixed shuffled order."""
    lines = []
    for en_subj, fr_subjs, person in SUBJECTS:
        for verb, forms in VERBS:
            en_verb = verb + "s" if person == 2 else verb
            if verb == "have" and person == 2:
                en_verb = "has"
            for noun in NOUNS:
                for adj in ADJECTIVES:
                    en = f"{en_subj} {en_verb} the {adj[0] + ' ' if adj[0] else ''}{noun[0]}."
                    for fr_subj in fr_subjs:
                        lines.append(f"{en}\t{_french(fr_subj, person, forms, noun, adj)}")
    random.Random(0).shuffle(lines)
    return EXTRA + lines


def tiny_corpus_sides() -> tuple[list[str], list[str]]:
    """The fake corpus' English and French sentences, normalised as a textbook run's training
    normalises them (lower-cased, a space before punctuation)."""
    from nmt.data.normalize import normalize

    pairs = [line.split("\t") for line in tiny_corpus_lines()]
    return ([normalize(en, True, "full") for en, _ in pairs],
            [normalize(fr, True, "full") for _, fr in pairs])


def run_metrics(run: Path) -> list[dict[str, Any]]:
    """A run's ``metrics.jsonl`` records without ``tokens_per_sec`` (timing, which differs
    between two runs of the same training)."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k != "tokens_per_sec"} for x in lines]


def reseal_cache(cache: Path) -> None:
    """Record the digests of a cache's files as they are now in its meta.json: a cache damaged
    by a test then passes the digest check, so that the checks behind it (the arrays' headers,
    the ids, the line counts) are what the test reaches, as with a cache some other writer made
    whole but wrong."""
    from nmt.data.cache import file_digests, meta_digest

    meta = json.loads((cache / "meta.json").read_text())
    meta["files"] = file_digests(cache)
    meta["digest"] = meta_digest(meta)
    (cache / "meta.json").write_text(json.dumps(meta))


class Hung(BaseException):
    """Raised by :func:`deadline`: not an Exception, so no handler in nmt can take it for an
    error it reports."""


@contextmanager
def deadline(seconds: int, what: str = "") -> Iterator[None]:
    """Fail the block (a blocking open or read included: the signal interrupts it) when it
    runs for more than ``seconds``: a guard against hanging, not a timing."""
    def expire(*_: Any) -> None:
        raise Hung(f"{what + ': ' if what else ''}still running after {seconds} s: hung")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def invoke(*args: str, input: bytes | str | None = None) -> tuple[int, str, str]:
    """``nmt ARGS`` through typer's test runner: exit code, stdout, stderr. An exception other
    than the CLI's own exit is raised, so a test sees its traceback."""
    from typer.testing import CliRunner

    from nmt.cli import app

    result = CliRunner().invoke(app, list(args), input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="session")
def sentencepiece_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One trained SentencePiece run (``test_export.sentencepiece_run``) for the tests that
    only read it: training it takes seconds."""
    from test_export import sentencepiece_run

    return sentencepiece_run(tmp_path_factory.mktemp("sp-run") / "run")


@pytest.fixture(scope="session")
def tiny_corpus_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "fra-eng.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("fra-eng/_about.txt", "A fake corpus for tests, built from templates.\n")
        z.writestr("fra-eng/fra.txt", "\n".join(tiny_corpus_lines()) + "\n")
    return path


@pytest.fixture(scope="session")
def tiny_corpus_sha256(tiny_corpus_zip: Path) -> str:
    with zipfile.ZipFile(tiny_corpus_zip) as z:
        return hashlib.sha256(z.read("fra-eng/fra.txt")).hexdigest()


@pytest.fixture()
def tiny_data_dir(
    tiny_corpus_zip: Path, tiny_corpus_sha256: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    data_dir = tmp_path / "data"
    (data_dir / "fra-eng").mkdir(parents=True)
    with zipfile.ZipFile(tiny_corpus_zip) as z:
        for name in ("fra-eng/fra.txt", "fra-eng/_about.txt"):
            with z.open(name) as src, open(data_dir / name, "wb") as dst:
                shutil.copyfileobj(src, dst)
    monkeypatch.setenv("NMT_CORPUS_SHA256", tiny_corpus_sha256)
    monkeypatch.setenv("NMT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("NMT_DATA_MIRROR", str(tiny_corpus_zip))  # never the network
    return data_dir


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any download fail as if offline (and forget a mirror from the environment)."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.delenv("NMT_DATA_MIRROR", raising=False)


@pytest.fixture()
def tiny_data_config() -> DataConfig:
    return DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1)
