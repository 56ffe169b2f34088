"""Software strings: how protected spans come through every engine (``make bench-spans``).

Two commands:

``python -m bench.software_strings corpus --out DIR [--target fr]`` builds a corpus of real
software messages from the gettext catalogues installed on this machine
(``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``: coreutils, apt, bash, git, ...), read with
polib. It keeps the single-line entries with a non-empty translation (a plural entry gives its
first form; space at either end is cut off), drops duplicate pairs, and deals the distinct
English strings (seeded) into a held-out test set (``--test-spans`` strings with a protected
span and ``--test-plain`` without, one reference each: the translation most catalogues give)
and the rest, every pair a line. It writes ``DIR/software.en`` / ``.<lang>`` (the rest),
``DIR/test.en`` / ``.<lang>``, ``*.origin`` (line-aligned: the catalogues each pair came from),
``DIR/sources.tsv`` (each catalogue: its Debian package, its licence as far as the package's
copyright file says, the entries read and kept) and ``DIR/README``. The strings are mostly GPL
or LGPL: they are for measuring only, never for shipping a model.

``python -m bench.software_strings measure --work DIR [--steps N]`` trains a model with
``--config`` (default ``configs/demo.toml``) on a mix of the prose corpus (``--prose``,
default the built-in one) and ``DIR/software`` (weight ``--weight``): the config is written to
``DIR/software-mix.toml``. It then translates the held-out software strings and the prose of
the run's test split through ``nmt`` (PyTorch) and ``--engine ctranslate2``, each with
``--spans off`` (what the model writes) and ``--spans repair`` (what nmt guarantees), and
through the exported ``.argosmodel`` in Argos Translate (its own virtual environment,
``--argos-venv``, no nmt code at run time; skipped with a note where there is none). Per
engine and test set: spans kept, span-bearing lines exact, lines with an invented span (of
all lines: a span in a translation of a line without any counts), BLEU and chrF; and what
each filter removed of the software strings. It prints a Markdown table stamped with the
machine and writes it to ``DIR/results.md`` (the rows also to ``DIR/results.json``).
``--device`` is where nmt trains and translates (``auto``: a GPU where there is one).

``python -m bench.software_strings argos --work DIR`` scores the ``.argosmodel`` a measurement
exported into ``DIR`` on another machine (a GPU's, which has no Argos Translate) through
argostranslate here, and puts its rows into ``DIR/results.json`` and ``DIR/results.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import CONFIGS, ROOT
from bench.machine import machine

LOCALES = Path("/usr/share/locale")
DPKG_INFO = Path("/var/lib/dpkg/info")
DOCS = Path("/usr/share/doc")
SOURCE = "en"

# --- the corpus --------------------------------------------------------------------------------


@dataclass
class Catalogue:
    """One ``.mo`` file: where it comes from and what it gave."""

    name: str  # the file's stem: coreutils, apt, git, ...
    package: str  # the Debian package that installed it ("unknown")
    licence: str  # as far as the package's copyright file says ("unknown")
    entries: int = 0  # translated entries read (the header aside)
    kept: int = 0  # pairs kept before duplicates went
    dropped: collections.Counter[str] = field(default_factory=collections.Counter)


def owning_packages(info: Path = DPKG_INFO) -> dict[str, str]:
    """Installed file -> the Debian package that installed it, from dpkg's file lists
    (``pkg.list`` or ``pkg:arch.list``); empty where there is no dpkg database."""
    owners: dict[str, str] = {}
    if not info.is_dir():
        return owners
    for listing in sorted(info.glob("*.list")):
        package = listing.stem.split(":")[0]
        try:
            text = listing.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.endswith(".mo"):
                owners[line] = package
    return owners


LICENCE_WORDS = (  # for copyright files that are not machine-readable: the first match
    ("GNU Lesser General Public License", "LGPL"), ("GNU Library General Public License", "LGPL"),
    ("GNU General Public License", "GPL"), ("MIT License", "MIT"), ("BSD", "BSD"),
    ("Apache License", "Apache"), ("public domain", "public domain"),
)


def licence_of(package: str, docs: Path = DOCS) -> str:
    """The licence of ``package`` as far as its copyright file says: the ``License:`` of a
    machine-readable file's ``Files: *`` paragraph, else the first well-known licence named,
    else ``unknown``."""
    try:
        text = (docs / package / "copyright").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    for paragraph in re.split(r"\n\s*\n", text):
        if re.search(r"^Files:\s*\*\s*$", paragraph, re.M):
            found = re.search(r"^License:\s*(\S.*)$", paragraph, re.M)
            if found:
                return found.group(1).strip()
    for words, name in LICENCE_WORDS:
        if words.lower() in text.lower():
            return name
    return "unknown"


def several_lines(text: str) -> bool:
    """A line break of any kind (``str.splitlines``'): not one line of an aligned file."""
    return len(text.splitlines()) > 1


def read_catalogue(path: Path, catalogue: Catalogue) -> list[tuple[str, str]]:
    """The pairs of one ``.mo`` file worth keeping; ``catalogue`` counts what went and why."""
    import polib

    pairs = []
    for entry in polib.mofile(str(path)):
        if not entry.msgid:  # the header
            continue
        if entry.msgid_plural:
            forms = entry.msgstr_plural
            target = forms[min(forms)] if forms else ""
        else:
            target = entry.msgstr
        catalogue.entries += 1
        if not target.strip() or not entry.msgid.strip():
            catalogue.dropped["untranslated"] += 1
        elif several_lines(entry.msgid) or several_lines(target):
            catalogue.dropped["several lines"] += 1
        else:  # space at the ends (an aligned file's reader and normalisation drop it)
            pairs.append((entry.msgid.strip(), target.strip()))
    catalogue.kept = len(pairs)
    return pairs


@dataclass
class Corpus:
    """The pairs of every catalogue, each with the catalogues that give it, in a fixed order."""

    catalogues: list[Catalogue]
    origins: dict[tuple[str, str], list[str]]  # (English, translation) -> catalogue names
    duplicates: int  # pairs given again (by another catalogue or the same one)


def read_corpus(locales: Path, lang: str, owners: dict[str, str] | None = None,
                docs: Path = DOCS) -> Corpus:
    """Every ``locales/LANG/LC_MESSAGES/*.mo``, sorted by name."""
    folder = locales / lang / "LC_MESSAGES"
    files = sorted(folder.glob("*.mo"))
    if not files:
        raise SystemExit(f"no gettext catalogues in {folder}")
    owners = owning_packages() if owners is None else owners
    catalogues: list[Catalogue] = []
    duplicates = 0
    origins: dict[tuple[str, str], list[str]] = {}
    for path in files:
        package = owners.get(str(path), "unknown")
        catalogue = Catalogue(path.stem, package,
                              licence_of(package, docs) if package != "unknown" else "unknown")
        for pair in read_catalogue(path, catalogue):
            seen = origins.setdefault(pair, [])
            if seen:
                duplicates += 1
            if path.stem not in seen:
                seen.append(path.stem)
        catalogues.append(catalogue)
    return Corpus(catalogues, origins, duplicates)


@dataclass
class Split:
    test: list[tuple[str, str]]  # one pair a distinct English string
    rest: list[tuple[str, str]]  # every other pair
    test_spans: int  # test strings with a protected span


def split_corpus(corpus: Corpus, test_spans: int, test_plain: int, seed: int = 1) -> Split:
    """Deal the distinct English strings (seeded) into the test set, ``test_spans`` with a
    protected span (the default kinds) and ``test_plain`` without, and the rest. A test
    string's reference is the translation most catalogues give (the first such in sorted
    order on a tie); its other translations are held out with it."""
    from nmt.data.spans import find_spans

    groups: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for pair in corpus.origins:
        groups[pair[0]].append(pair)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    wanted = {True: test_spans, False: test_plain}
    chosen: set[str] = set()
    for english in order:
        has = bool(find_spans(english))
        if wanted[has] > 0:
            wanted[has] -= 1
            chosen.add(english)
        if not any(wanted.values()):
            break
    test = []
    for english in (e for e in order if e in chosen):
        pairs = sorted(groups[english], key=lambda p: (-len(corpus.origins[p]), p[1]))
        test.append(pairs[0])
    rest = [p for p in corpus.origins if p[0] not in chosen]
    spans = sum(bool(find_spans(e)) for e, _ in test)
    return Split(test, rest, spans)


def write_side(path: Path, lines: Iterable[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def write_corpus(out: Path, lang: str, corpus: Corpus, split: Split, locales: Path,
                 seed: int) -> dict[str, Any]:
    """The files of the corpus in ``out``; a summary (also ``out/corpus.json``)."""
    from nmt.data.spans import find_spans

    out.mkdir(parents=True, exist_ok=True)
    for name, pairs in (("software", split.rest), ("test", split.test)):
        write_side(out / f"{name}.{SOURCE}", (e for e, _ in pairs))
        write_side(out / f"{name}.{lang}", (t for _, t in pairs))
        write_side(out / f"{name}.origin", (",".join(corpus.origins[p]) for p in pairs))
    rows = ["catalogue\tpackage\tlicence\tentries\tkept\tdropped"]
    for c in corpus.catalogues:
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(c.dropped.items()))
        rows.append(f"{c.name}\t{c.package}\t{c.licence}\t{c.entries}\t{c.kept}\t{dropped}")
    (out / "sources.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    licences = collections.Counter(c.licence for c in corpus.catalogues)
    with_spans = sum(bool(find_spans(e)) for e, _ in split.rest)
    summary = {
        "locales": str(locales / lang / "LC_MESSAGES"), "target": lang, "seed": seed,
        "catalogues": len(corpus.catalogues),
        "entries": sum(c.entries for c in corpus.catalogues),
        "dropped": dict(sum((c.dropped for c in corpus.catalogues), collections.Counter())),
        "duplicates": corpus.duplicates, "pairs": len(corpus.origins),
        "english_strings": len({e for e, _ in corpus.origins}),
        "training_pairs": len(split.rest), "training_pairs_with_spans": with_spans,
        "test_lines": len(split.test), "test_lines_with_spans": split.test_spans,
        "licences": dict(licences.most_common()),
    }
    (out / "corpus.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    names = ", ".join(f"{c.name} ({c.package}, {c.licence})" for c in corpus.catalogues)
    (out / "README").write_text(
        f"Software strings, English to {lang}, from the gettext catalogues installed in "
        f"{summary['locales']} ({len(corpus.catalogues)} files, read with polib): {names}.\n"
        "Licences as the Debian packages' copyright files say; mostly GPL and LGPL: for "
        "measuring only, never to ship in or with a model.\n"
        f"software.{SOURCE}/.{lang}: {len(split.rest):,} pairs ({with_spans:,} with a protected "
        f"span); test.{SOURCE}/.{lang}: {len(split.test):,} distinct English strings "
        f"({split.test_spans:,} with a span), one reference each, held out with every other "
        f"translation of them (seed {seed}); *.origin: the catalogues of each line; "
        "sources.tsv: each catalogue's package, licence and counts.\n", encoding="utf-8")
    return summary


def build_corpus(out: Path, lang: str = "fr", locales: Path = LOCALES, test_spans: int = 1000,
                 test_plain: int = 1000, seed: int = 1) -> dict[str, Any]:
    corpus = read_corpus(locales, lang)
    split = split_corpus(corpus, test_spans, test_plain, seed)
    return write_corpus(out, lang, corpus, split, locales, seed)


# --- the measurement ---------------------------------------------------------------------------

RUN_NAME = "software-mix"
ENGINES = (("nmt", "off"), ("nmt", "repair"), ("ctranslate2", "off"), ("ctranslate2", "repair"),
           ("argos", "as packaged"))

ARGOS_SCRIPT = """
import json, sys
import spacy
import argostranslate.package, argostranslate.translate
package, source, target, lines, out = sys.argv[1:]
argostranslate.package.install_from_path(package)
[pkg] = [p for p in argostranslate.package.get_installed_packages()
         if p.from_code == source and p.to_code == target]
# offline: a rule-based spaCy sentencizer in place of the MiniSBD model Argos would download
spacy.blank(source).to_disk(pkg.package_path / "spacy")
with open(lines, encoding="utf-8") as f:
    sentences = f.read().splitlines()
hyps = [argostranslate.translate.translate(s, source, target) for s in sentences]
with open(out, "w", encoding="utf-8") as f:
    json.dump(hyps, f)
"""


def nmt(*args: str, log: list[str]) -> str:
    """Run ``python -m nmt ARGS``; its stdout (a failure ends the benchmark, saying why)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nmt", *args], cwd=ROOT, capture_output=True,
                          text=True)
    log.append(f"$ nmt {' '.join(args)}  ({time.perf_counter() - start:.0f} s)")
    if done.returncode != 0:
        raise SystemExit(f"nmt {' '.join(args)} failed ({done.returncode}): "
                         f"{done.stderr.strip()[-800:]}")
    return done.stdout


def corpus_form(prose: str) -> str:
    """``--prose`` as data.corpus takes it from the repository: a path made absolute, a name
    (``fra-eng``, a Tatoeba pair) as given."""
    return str(Path(prose).resolve()) if "/" in prose or Path(prose).exists() else prose


def mix_config(work: Path, config: Path, prose: str, weight: float) -> Path:
    """``work/software-mix.toml``: ``config``'s settings, and the prose corpus and the software
    strings as two weighted sources."""
    path = work / f"{RUN_NAME}.toml"
    path.write_text(
        config.read_text(encoding="utf-8")
        + f"\n# {__name__}: the prose corpus and the software strings, mixed\n"
        f"[[data.sources]]\ncorpus = {json.dumps(corpus_form(prose))}\nname = \"prose\"\n"
        f"\n[[data.sources]]\ncorpus = {json.dumps(str((work / 'software').resolve()))}\n"
        f"name = \"software\"\nweight = {weight}\n"
        "licence = \"GPL and LGPL gettext catalogues of Debian packages (sources.tsv): for "
        "measuring only\"\n", encoding="utf-8")
    return path


@dataclass
class TestSet:
    name: str  # "software" or "prose"
    src: Path
    refs: list[Path]  # one file a reference, line-aligned; an empty line: no such reference

    def sources(self) -> list[str]:
        return self.src.read_text(encoding="utf-8").splitlines()

    def references(self) -> list[list[str]]:
        streams = [r.read_text(encoding="utf-8").splitlines() for r in self.refs]
        return [[s[i] for s in streams if s[i]] for i in range(len(streams[0]))]


def prose_test_set(run: Path, work: Path, lang: str, limit: int,
                   data_dir: Path | None) -> TestSet:
    """The run's test split without the software strings (the sources were split together),
    its first ``limit`` sentences, written as ``work/prose-test.en`` and one file per
    reference (``prose-test.LANG``, ``prose-test.2.LANG``, ...)."""
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.normalize import normalize
    from nmt.data.prepare import prepare_trained
    from nmt.runs.loading import run_tokenizer
    from nmt.runs.records import read_excluded

    cfg = load_config(run / "config.toml").data
    prepared = prepare_trained(cfg, data_dir or default_data_dir(), run_tokenizer(run),
                               read_excluded(run), log=lambda s: None)
    software = {normalize(e, cfg.lowercase, cfg.normalization, lang=cfg.source)
                for e in (work / f"software.{SOURCE}").read_text(encoding="utf-8").splitlines()}
    sources, references = prepared.splits["test"].grouped()
    kept = [(s, r) for s, r in zip(sources, references, strict=True) if s not in software]
    kept = kept[:limit] if limit > 0 else kept
    if not kept:
        raise SystemExit(f"{run}: its test split has no prose sentences")
    src = work / f"prose-test.{SOURCE}"
    write_side(src, (s for s, _ in kept))
    refs = []
    for k in range(max(len(r) for _, r in kept)):
        refs.append(work / (f"prose-test.{lang}" if k == 0 else f"prose-test.{k + 1}.{lang}"))
        write_side(refs[-1], (r[k] if k < len(r) else "" for _, r in kept))
    return TestSet("prose", src, refs)


def integrity(sources: Sequence[str], hyps: Sequence[str], spec: str) -> dict[str, Any]:
    """How ``hyps`` keep the protected spans (kinds ``spec``) of ``sources``: spans kept (as
    many times as the source has them), span-bearing lines whose translation holds exactly
    their spans, its tags nested as the source's and its directives in its order
    (``holds_in_order``), lines whose translation holds a span its source lacks (of every
    line, those without spans too), and of the lines with a ``%``, those whose translation
    fails the check a ``c-format`` PO entry must pass (``printf_kept``: the program that
    formats it would read the wrong arguments or fail)."""
    from nmt.data.spans import holds_in_order, rules
    from nmt.localisation.placeholders import printf_kept

    found = rules(spec)
    span_lines = spans = kept = exact = invented = percent_lines = unformatted = 0
    by_kind: dict[str, list[int]] = {}  # kind -> [kept, of]
    for source, hyp in zip(sources, hyps, strict=True):
        in_source = found.find(source)
        wanted = collections.Counter(s.text for s in in_source)
        in_hyp = found.find(hyp)
        got = collections.Counter(s.text for s in in_hyp)
        if wanted:
            span_lines += 1
            spans += sum(wanted.values())
            kept += sum((wanted & got).values())
            exact += holds_in_order(in_source, in_hyp)
            kinds = {s.text: s.kind for s in in_source}
            for text, n in wanted.items():
                counts = by_kind.setdefault(kinds[text], [0, 0])
                counts[0] += min(n, got[text])
                counts[1] += n
        invented += bool(got - wanted)
        if "%" in source:
            percent_lines += 1
            unformatted += not printf_kept(source, hyp)

    def share(n: int, of: int) -> float | None:
        return round(100 * n / of, 2) if of else None

    return {"lines": len(sources), "span_lines": span_lines, "span_count": spans,
            "spans_kept": share(kept, spans), "lines_exact": share(exact, span_lines),
            "lines_invented": share(invented, len(sources)),
            "percent_lines": percent_lines, "format_failed": unformatted,
            "kept_by_kind": {k: by_kind[k] for k in sorted(by_kind, key=lambda k: -by_kind[k][1])}}


def score_nmt(run: Path, test: TestSet, engine: str, spans: str, spec: str,
              log: list[str], device: str = "cpu") -> dict[str, Any]:
    """``nmt bleu`` of ``test`` through ``engine`` with ``--spans spans`` on ``device``, and
    the integrity of its saved translations."""
    refs = [a for r in test.refs for a in ("--ref", str(r))]
    report = json.loads(nmt("bleu", "--run", str(run), "--src", str(test.src), *refs,
                            "--engine", engine, "--spans", spans, "--device", device, "--json",
                            log=log).strip().splitlines()[-1])
    hyps = Path(report["hypotheses"]).read_text(encoding="utf-8").splitlines()
    return {**integrity(test.sources(), hyps, spec), "bleu": report["multi"]["bleu"],
            "chrf": report["multi"]["chrf"]}


def argos_python(venv: Path) -> Path | None:
    python = venv / "bin" / "python"
    return python if python.exists() else None


def score_argos(package: Path, python: Path, test: TestSet, lang: str, spec: str,
                work: Path, log: list[str]) -> dict[str, Any]:
    """The ``.argosmodel`` installed and run by argostranslate in its own environment (no nmt
    code), one line at a time as Argos Translate translates a text; scored here."""
    from nmt.evaluate import corpus_scores

    home = work / "argos-home"
    out = work / f"argos-hyps.{test.name}.json"
    env = {**{k: v for k, v in os.environ.items()
              if k != "PYTHONPATH" and not k.startswith("ARGOS_")},
           "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
           "ARGOS_CHUNK_TYPE": "SPACY"}
    start = time.perf_counter()
    done = subprocess.run([str(python), "-c", ARGOS_SCRIPT, str(package), SOURCE, lang,
                           str(test.src), str(out)], env=env, capture_output=True, text=True)
    log.append(f"$ argostranslate {package.name} < {test.src.name}  "
               f"({time.perf_counter() - start:.0f} s)")
    if done.returncode != 0:
        raise SystemExit(f"argostranslate failed ({done.returncode}): "
                         f"{done.stderr.strip()[-800:]}")
    hyps = json.loads(out.read_text(encoding="utf-8"))
    scores = corpus_scores(hyps, test.references(), lang=lang)
    return {**integrity(test.sources(), hyps, spec), "bleu": round(scores.bleu, 2),
            "chrf": round(scores.chrf, 2)}


def filter_report(run: Path) -> list[dict[str, Any]]:
    """Each source's pairs read and kept, and what each filter removed, from the run's
    ``corpus.json`` (what ``nmt data prepare`` reported)."""
    record = json.loads((run / "corpus.json").read_text(encoding="utf-8"))
    rows = []
    for source in record["sources"]:
        filtered = {k: v for k, v in source["filtered"].items() if v}
        rows.append({"name": source["name"], "read": source["read"], "kept": source["kept"],
                     "filtered": filtered,
                     # duplicates, empty sides, over data.max_words
                     "otherwise": source["read"] - source["kept"] - sum(filtered.values()),
                     "train_pairs": source["train_pairs"],
                     "train_pairs_weighted": source["train_pairs_weighted"]})
    return rows


def corpus_inputs(lang: str) -> list[str]:
    """The files of a corpus ``corpus`` wrote that a measurement reads (and its provenance)."""
    return ["corpus.json", "README", "sources.tsv"] + [
        f"{side}.{code}" for side in ("software", "test") for code in (SOURCE, lang)]


def software_test(work: Path, lang: str) -> TestSet:
    """The held-out software strings of the corpus in ``work``."""
    return TestSet("software", work / f"test.{SOURCE}", [work / f"test.{lang}"])


def saved_prose_test(work: Path, lang: str) -> TestSet:
    """The prose test set an earlier measurement wrote into ``work``."""
    return TestSet("prose", work / f"prose-test.{SOURCE}",
                   sorted(work.glob(f"prose-test*.{lang}"), key=lambda p: (len(p.name), p.name)))


def last_step(records: Iterable[dict[str, Any]]) -> int | None:
    """The last step a run's metrics records hold (a resumed run's summary line gives only the
    steps of its own invocation)."""
    return max((int(r["step"]) for r in records if isinstance(r.get("step"), int)),
               default=None)


def argos_note(venv: Path) -> str:
    return (f"not measured: no Argos Translate environment at {venv} (`make test-argos` makes "
            "one; `python -m bench.software_strings argos --work DIR` scores the package later)")


def measure(work: Path, steps: int | None, config: Path, prose: str, weight: float,
            argos_venv: Path, data_dir: Path | None, prose_limit: int,
            settings: Sequence[str] = (), train: bool = True,
            device: str = "cpu") -> dict[str, Any]:
    """Train on the mix, score both test sets through every engine; the results. ``train``
    False scores the run an earlier measurement trained in ``work`` again (after a change to
    translation or to the span rules), on the prose test set that measurement wrote. The Argos
    package is exported to ``work`` either way, to be scored later where there is no Argos
    Translate environment here."""
    from nmt.config import load_config
    from nmt.runs.directory import read_metrics

    summary = json.loads((work / "corpus.json").read_text(encoding="utf-8"))
    lang = summary["target"]
    log: list[str] = []
    start = time.perf_counter()
    stamp = machine()  # the commit that trains and scores, before anything can change it
    mixed = mix_config(work, config, prose, weight)
    run = work / "runs" / RUN_NAME
    common = [*(["--data-dir", str(data_dir)] if data_dir else [])]
    sets = [a for s in [f"data.source={SOURCE}", f"data.target={lang}",
                        *([f"train.device={device}"] if device != "cpu" else []), *settings]
            for a in ("--set", s)]
    if steps is not None:
        sets += ["--set", f"train.max_steps={steps}", "--set", "train.max_minutes=0"]
    if train:
        nmt("train", "--config", str(mixed), "--runs-dir", str(work / "runs"), "--run-name",
            RUN_NAME, "--overwrite", *common, *sets, log=log)
    elif not (run / "checkpoints" / "last.pt").is_file():
        raise SystemExit(f"{run}: no trained run to score again (measure without --no-train)")
    spec = load_config(run / "config.toml").data.spans
    tests = [software_test(work, lang),
             prose_test_set(run, work, lang, prose_limit, data_dir) if train
             or not (work / f"prose-test.{SOURCE}").is_file() else saved_prose_test(work, lang)]
    python = argos_python(argos_venv)
    package = work / f"{RUN_NAME}.argosmodel"
    nmt("export", "--run", str(run), "--to", "argos", "--output", str(package), "--overwrite",
        "--no-score", log=log)
    rows = []
    for test in tests:
        for engine, spans in ENGINES:
            row: dict[str, Any] = {"test": test.name, "engine": engine, "spans": spans}
            if engine == "argos":
                if python is None:
                    row["note"] = argos_note(argos_venv)
                else:
                    row.update(score_argos(package, python, test, lang, spec, work, log))
            else:
                row.update(score_nmt(run, test, engine, spans, spec, log, device))
            rows.append(row)
    if device != "cpu":
        import torch

        if torch.cuda.is_available():
            stamp["gpu"] = torch.cuda.get_device_name(0)
    return {"machine": stamp, "steps": steps, "trained_steps": last_step(read_metrics(run)),
            "config": str(config), "prose": prose, "weight": weight, "device": device,
            "spans_spec": spec, "corpus": summary, "rows": rows, "filters": filter_report(run),
            "log": log, "minutes": round((time.perf_counter() - start) / 60, 1)}


def score_package(work: Path, argos_venv: Path) -> dict[str, Any]:
    """The Argos rows of ``work/results.json`` scored through the package a measurement
    exported there (on another machine, say): the results with those rows replaced."""
    results = work / "results.json"
    package = work / f"{RUN_NAME}.argosmodel"
    for needed in (results, package, work / f"prose-test.{SOURCE}"):
        if not needed.is_file():
            raise SystemExit(f"--work {work}: no {needed.name} (a measurement writes it)")
    python = argos_python(argos_venv)
    if python is None:
        raise SystemExit(f"--argos-venv {argos_venv}: no Argos Translate environment there "
                         "(`make test-argos` makes one)")
    try:
        result = json.loads(results.read_text(encoding="utf-8"))
        lang, spec = result["corpus"]["target"], result["spans_spec"]
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{results}: not a measurement's results ({e})") from None
    tests = {"software": software_test(work, lang), "prose": saved_prose_test(work, lang)}
    log: list[str] = []
    for row in result["rows"]:
        if row["engine"] == "argos":
            row.pop("note", None)
            row.update(score_argos(package, python, tests[row["test"]], lang, spec, work, log))
    result["argos_machine"] = machine()
    result["log"] = [*result.get("log", []), *log]
    return result


# What a measurement on another machine brings back for its Argos rows: the package and the
# test sets, as one tar cut into parts small enough to travel (a GPU machine's files come back
# 16 MiB at most each).
PACKED = "spans-package.tar"
PART_BYTES = 15 * 2**20


def packed_files(work: Path, lang: str) -> list[Path]:
    names = ("corpus.json", "results.json", "results.md", f"{RUN_NAME}.argosmodel",
             f"test.{SOURCE}", f"test.{lang}")
    return [work / name for name in names] + sorted(work.glob(f"prose-test*.{SOURCE}")) \
        + sorted(work.glob(f"prose-test*.{lang}"))


def pack(work: Path, out: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """``work``'s package, test sets and results as ``out/spans-package.tar.00-of-NN``,
    ``.01-of-NN``, ... of ``part_bytes`` at most (the names say how many, so a missing part
    is seen); the parts."""
    import tarfile

    lang = json.loads((work / "corpus.json").read_text(encoding="utf-8"))["target"]
    whole = work / PACKED
    with tarfile.open(whole, "w") as tar:
        for path in packed_files(work, lang):
            tar.add(path, arcname=path.name)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{PACKED}.*"):
        old.unlink()
    count = -(-whole.stat().st_size // part_bytes)
    parts: list[Path] = []
    with whole.open("rb") as f:
        while chunk := f.read(part_bytes):
            parts.append(out / f"{PACKED}.{len(parts):02d}-of-{count:02d}")
            parts[-1].write_bytes(chunk)
    whole.unlink()
    return parts


def unpack(parts_dir: Path, work: Path) -> list[str]:
    """The parts :func:`pack` wrote into ``parts_dir``, joined and unpacked into ``work``; the
    names unpacked."""
    import tarfile

    parts = sorted(parts_dir.glob(f"{PACKED}.[0-9][0-9]-of-[0-9][0-9]"))
    if not parts:
        raise SystemExit(f"--unpack {parts_dir}: no {PACKED}.00-of-NN there")
    count = int(parts[0].name[-2:])
    expected = [f"{PACKED}.{k:02d}-of-{count:02d}" for k in range(count)]
    if [p.name for p in parts] != expected:
        raise SystemExit(f"--unpack {parts_dir}: parts missing (found "
                         f"{', '.join(p.name for p in parts)})")
    work.mkdir(parents=True, exist_ok=True)
    whole = work / PACKED
    with whole.open("wb") as f:
        for part in parts:
            f.write(part.read_bytes())
    try:
        with tarfile.open(whole) as tar:
            names = tar.getnames()
            tar.extractall(work, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise SystemExit(f"--unpack {parts_dir}: not whole ({e})") from None
    finally:
        whole.unlink()
    return names


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def unformatted(row: dict[str, Any]) -> str:
    """"N of M" lines with a ``%`` that would not format; "-" for none or an older row."""
    if not row.get("percent_lines"):
        return "-"
    return f"{row['format_failed']:,} of {row['percent_lines']:,}"


def markdown(r: dict[str, Any]) -> str:
    m, c = r["machine"], r["corpus"]
    steps = "the config's steps" if r["steps"] is None else f"{r['steps']} steps"
    if r.get("trained_steps") is not None and r["trained_steps"] != r["steps"]:
        steps += f" ({r['trained_steps']:,} trained)"
    where = f"{m['gpu']} ({m.get('cpu', '?')})" if m.get("gpu") else m.get("cpu", "?")
    lines = [
        f"`python -m bench.software_strings measure`, {Path(r['config']).name}, {steps}, "
        f"prose `{r['prose']}` + software strings (weight {r['weight']}); {where}, "
        f"{m.get('date', '?')}, commit {m.get('commit', '?')}; {r['minutes']} minutes in all.",
        *([f"The Argos rows: `python -m bench.software_strings argos`, "
           f"{r['argos_machine'].get('cpu', '?')}, {r['argos_machine'].get('date', '?')}, "
           f"commit {r['argos_machine'].get('commit', '?')}."] if "argos_machine" in r else []),
        "",
        f"Software strings: {c['catalogues']} gettext catalogues of {c['locales']} "
        f"({c['entries']:,} entries, {c['pairs']:,} distinct pairs); training "
        f"{c['training_pairs']:,} pairs ({c['training_pairs_with_spans']:,} with a span), test "
        f"{c['test_lines']:,} strings ({c['test_lines_with_spans']:,} with a span). Invented: "
        "lines whose translation holds a span its source lacks, of all lines. Would not format: "
        "of the lines with a `%`, those whose translation fails `msgfmt -c`'s check of a "
        "c-format string (`printf_kept`).",
        "",
        "| test | engine | --spans | lines | span lines | spans kept | span lines exact "
        "| lines invented | would not format | BLEU | chrF |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        if "note" in row:
            lines.append(f"| {row['test']} | {row['engine']} | {row['spans']} | "
                         f"{row['note']} | | | | | | | |")
            continue
        lines.append(
            f"| {row['test']} | {row['engine']} | {row['spans']} | {row['lines']:,} | "
            f"{row['span_lines']:,} | {percent(row['spans_kept'])} | "
            f"{percent(row['lines_exact'])} | {percent(row['lines_invented'])} | "
            f"{unformatted(row)} | {row['bleu']:.2f} | {row['chrf']:.2f} |")
    counted = [row for row in r["rows"] if row.get("kept_by_kind")]
    kinds = list(dict.fromkeys(k for row in counted for k in row["kept_by_kind"]))
    if counted:
        lines += ["", "Spans kept by kind, of the test lines' spans of each kind:", "",
                  "| test | engine | --spans | " + " | ".join(kinds) + " |",
                  "|---|---|---|" + "---:|" * len(kinds)]
        for row in counted:
            cells = [(f"{row['kept_by_kind'][k][0]:,} / {row['kept_by_kind'][k][1]:,}"
                      if k in row["kept_by_kind"] else "") for k in kinds]
            lines.append(f"| {row['test']} | {row['engine']} | {row['spans']} | "
                         + " | ".join(cells) + " |")
    lines += ["", "What cleaning removed of each source (`nmt data prepare`'s report; the pairs "
              "are in the cache's rejected.tsv):", "",
              "| source | pairs read | kept | removed by each filter | duplicates, empty, too "
              "long | training pairs (weighted) |", "|---|---:|---:|---|---:|---:|"]
    for f in r["filters"]:
        removed = ", ".join(f"{k} {v:,}" for k, v in f["filtered"].items()) or "none"
        lines.append(f"| {f['name']} | {f['read']:,} | {f['kept']:,} | {removed} | "
                     f"{f['otherwise']:,} | {f['train_pairs']:,} "
                     f"({f['train_pairs_weighted']:,}) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.software_strings",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("corpus", help="build the software strings from gettext catalogues")
    c.add_argument("--out", type=Path, required=True, help="the corpus' directory")
    c.add_argument("--target", default="fr", help="the catalogues' language (fr, de, ...)")
    c.add_argument("--locales", type=Path, default=LOCALES,
                   help="where LANG/LC_MESSAGES/*.mo are (default /usr/share/locale)")
    c.add_argument("--test-spans", type=int, default=1000,
                   help="held-out strings with a protected span")
    c.add_argument("--test-plain", type=int, default=1000, help="held-out strings without")
    c.add_argument("--seed", type=int, default=1)
    m = sub.add_parser("measure", help="train on prose + software strings, score every engine")
    m.add_argument("--work", type=Path, required=True, help="a directory `corpus` wrote")
    m.add_argument("--steps", type=int, default=None, help="training steps (default: the "
                   "config's, with its time budget)")
    m.add_argument("--config", type=Path, default=CONFIGS / "demo.toml")
    m.add_argument("--prose", default="fra-eng", help="the prose corpus, as data.corpus takes "
                   "it (default the built-in fra-eng)")
    m.add_argument("--weight", type=float, default=1.0, help="the software strings' weight")
    m.add_argument("--argos-venv", type=Path,
                   default=Path(os.environ.get("NMT_ARGOS_VENV", ROOT / "build" / "argos-venv")),
                   help="a virtual environment with argostranslate (default build/argos-venv, "
                   "which `make test-argos` makes; none: Argos is not measured)")
    m.add_argument("--data-dir", type=Path, default=None,
                   help="corpus and cache directory (default $NMT_DATA_DIR or data/)")
    m.add_argument("--prose-limit", type=int, default=2000,
                   help="prose test sentences at most (0: the whole test split)")
    m.add_argument("--set", dest="settings", action="append", default=[],
                   help="a config override for training, section.key=value (repeatable)")
    m.add_argument("--no-train", action="store_true", help="score the run an earlier "
                   "measurement trained in --work again, on the prose test set it wrote")
    m.add_argument("--device", default="cpu", help="where nmt trains and translates: cpu, "
                   "cuda, auto (a GPU where there is one)")
    a = sub.add_parser("argos", help="score the Argos package a measurement exported into "
                       "--work (on a machine without Argos Translate) here")
    a.add_argument("--work", type=Path, required=True, help="a measurement's directory")
    a.add_argument("--argos-venv", type=Path, default=m.get_default("argos_venv"),
                   help="a virtual environment with argostranslate (default build/argos-venv)")
    a.add_argument("--unpack", type=Path, default=None, help=f"a folder with the parts "
                   f"({PACKED}.00-of-NN, ...) a GPU check's spans step wrote: unpacked into "
                   "--work first")
    args = p.parse_args(argv)
    if args.command == "argos":
        if args.unpack is not None:
            unpack(args.unpack, args.work)
        result = score_package(args.work, args.argos_venv)
        write_results(args.work, result)
        return
    if args.command == "corpus":
        if min(args.test_spans, args.test_plain) < 0:
            p.error("--test-spans, --test-plain: expected 0 or more")
        summary = build_corpus(args.out, args.target, args.locales, args.test_spans,
                               args.test_plain, args.seed)
        print(json.dumps(summary, indent=1))
        return
    if args.steps is not None and args.steps < 1:
        p.error("--steps: expected 1 or more")
    if not (args.work / "corpus.json").is_file():
        p.error(f"--work {args.work}: no corpus.json (run `corpus --out {args.work}` first)")
    result = measure(args.work, args.steps, args.config, args.prose, args.weight,
                     args.argos_venv, args.data_dir, args.prose_limit, args.settings,
                     train=not args.no_train, device=args.device)
    write_results(args.work, result)


def write_results(work: Path, result: dict[str, Any]) -> None:
    """``work/results.json`` and ``work/results.md``; the table printed."""
    table = markdown(result)
    (work / "results.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (work / "results.md").write_text(table, encoding="utf-8")
    print(table, end="")


if __name__ == "__main__":
    main()
