"""Caches byte for byte: ``nmt data prepare`` on seven configs, every file's SHA-256 recorded,
then compared with the record (a change to how a cache is built that should not change what it
holds, such as a rewrite of :mod:`nmt.data.prepare`, is checked with it).

    python -m bench.cache_identity record bench/cache_identity.json   # before the change
    python -m bench.cache_identity check bench/cache_identity.json    # after it: identical

The configs cover the built-in corpus (the demo's, cut to 20,000 pairs, with case
augmentation), the textbook's two recipes, a word tokenizer, two weighted sources (one
back-translated), no language check and no filters, and given valid and test files. The
corpora the configs read are written from the built-in corpus (``NMT_DATA_MIRROR`` or the
data directory holds it) into ``--work``, a fixed path, as the caches record their corpora's
paths. meta.json is compared without its ``seconds`` (the build's time) and its ``digest``
(which covers the seconds); every other file whole.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORK = Path("/tmp/nmt-cache-identity")
TIMING = ("seconds", "digest")  # meta.json's fields that differ from one build to the next


def corpus_lines(n: int, skip: int = 0) -> list[tuple[str, str]]:
    """``n`` (English, French) pairs of the built-in corpus from its ``skip``-th line."""
    mirror = Path(os.environ.get("NMT_DATA_MIRROR", "/work/shared/data"))
    archive = mirror / "fra-eng.zip" if mirror.is_dir() else mirror
    with zipfile.ZipFile(archive) as z:
        lines = z.read("fra-eng/fra.txt").decode("utf-8").splitlines()
    return [tuple(line.split("\t")[:2]) for line in lines[skip:skip + n]]  # type: ignore[misc]


def write_pairs(prefix: Path, pairs: list[tuple[str, str]]) -> str:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    Path(f"{prefix}.fr").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return str(prefix)


def configs(work: Path) -> dict[str, tuple[str | None, list[str]]]:
    """Each config's name: its file (None: the defaults) and its ``--set`` overrides."""
    a = write_pairs(work / "corpora" / "a" / "train", corpus_lines(6000, 20000))
    b = write_pairs(work / "corpora" / "b" / "train", corpus_lines(3000, 40000))
    bt = write_pairs(work / "corpora" / "bt" / "train", corpus_lines(1500, 60000))
    valid = write_pairs(work / "corpora" / "given" / "valid", corpus_lines(300, 80000))
    test = write_pairs(work / "corpora" / "given" / "test", corpus_lines(300, 90000))
    sources = work / "sources.toml"
    sources.write_text(
        "[data]\nvocab_size = 800\nmax_words = 12\ncase_augment = 0.2\n\n"
        f'[[data.sources]]\ncorpus = "{a}"\nlicence = "CC BY 2.0 FR"\n\n'
        f'[[data.sources]]\ncorpus = "{b}"\nweight = 2.5\nname = "bee"\nfilters = "none"\n'
        'licence = "CC BY 2.0 FR"\n\n'
        f'[[data.sources]]\ncorpus = "{bt}"\nweight = 0.5\nback_translated = true\n'
        'licence = "CC BY 2.0 FR"\n', encoding="utf-8")
    demo = str(REPO / "configs" / "demo.toml")
    return {
        "demo": (demo, ["data.max_pairs=20000"]),
        "d2l-gru": (str(REPO / "configs" / "d2l-gru.toml"), []),
        "d2l-transformer": (str(REPO / "configs" / "d2l-transformer.toml"), []),
        "word": (demo, ["data.max_pairs=15000", "data.tokenizer=word", "data.min_freq=2",
                        "data.case_forms=textbook,title,upper"]),
        "sources": (str(sources), []),
        "no-langid": (None, ["data.max_pairs=15000", "data.langid=false",
                             "data.filters=none", "data.vocab_size=1000", "data.dedup=false"]),
        "given-held-out": (None, ["data.max_pairs=10000", "data.vocab_size=1000",
                                  f"data.valid={valid}", f"data.test={test}"]),
    }


def digests(cache_dir: Path) -> dict[str, str]:
    """Every file's SHA-256 by name, meta.json's without :data:`TIMING`."""
    out = {}
    for path in sorted(cache_dir.iterdir()):
        if path.name == "meta.json":
            meta = json.loads(path.read_text(encoding="utf-8"))
            kept = {k: v for k, v in meta.items() if k not in TIMING}
            data = json.dumps(kept, sort_keys=True).encode()
        else:
            data = path.read_bytes()
        out[path.name] = hashlib.sha256(data).hexdigest()
    return out


def build_all(work: Path) -> dict[str, dict[str, Any]]:
    """Each config's cache built afresh: its directory's name (the key) and its files' digests."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    found: dict[str, dict[str, Any]] = {}
    for name, (config, sets) in configs(work).items():
        data_dir = work / "data" / name
        command = [sys.executable, "-m", "nmt", "data", "prepare", "--data-dir", str(data_dir)]
        command += ["--config", config] if config else []
        for s in sets:
            command += ["--set", s]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"{name}: nmt data prepare failed:\n{done.stderr[-2000:]}")
        (cache_dir,) = (data_dir / "cache").iterdir()
        found[name] = {"key": cache_dir.name, "files": digests(cache_dir)}
        print(f"{name}: {len(found[name]['files'])} files")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("record", "check"))
    parser.add_argument("record", type=Path, help="the JSON of the digests")
    parser.add_argument("--work", type=Path, default=WORK)
    args = parser.parse_args()
    found = build_all(args.work)
    if args.mode == "record":
        args.record.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n",
                               encoding="utf-8")
        print(f"recorded {args.record}")
        return
    expected = json.loads(args.record.read_text(encoding="utf-8"))
    differ = [f"{name}: {file}" for name in sorted(set(expected) | set(found))
              for file in sorted(set(expected.get(name, {}).get("files", {}))
                                 | set(found.get(name, {}).get("files", {})) | {"(key)"})
              if (file == "(key)" and expected.get(name, {}).get("key")
                  != found.get(name, {}).get("key"))
              or (file != "(key)" and expected.get(name, {}).get("files", {}).get(file)
                  != found.get(name, {}).get("files", {}).get(file))]
    if differ:
        raise SystemExit("caches differ:\n  " + "\n  ".join(differ))
    print(f"identical: {len(found)} configs, "
          f"{sum(len(f['files']) for f in found.values())} files")


if __name__ == "__main__":
    main()
