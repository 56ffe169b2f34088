"""``make gpu-check``: the GPU path proven in one command, on a machine that has a CUDA device
and PyTorch but may have no package registry; ``make gpu-bundle`` prepares what it needs.

``python -m bench.gpu bundle --dest build/gpu-bundle [--present FILE] [--corpus PATH]``, where
a registry is reachable: downloads the wheels of every dependency of nmt but torch (and the
linters) for CPython 3.12 on x86-64 Linux, with ``requirements.txt`` to install them from and
a copy of the corpus zip. ``--present`` takes ``pip list --format=freeze`` of the GPU machine
and leaves out the wheels of what it already has (a smaller bundle to carry).

``python -m bench.gpu check --step STEP --out DIR [--bundle DIR]``, on the GPU machine once the
bundle is installed (``make gpu-check`` installs it with ``pip install --no-index``), runs one
step or all (``all``: in the order below) within ``--seconds`` (:data:`CHECK_SECONDS`: the
whole check fits one lease of a GPU machine, start included), each step taking its share
(:data:`SHARES`), and writes ``DIR/STEP.json``, ``DIR/STEP.md`` and the children's output to
``DIR/logs/STEP.log``:

- ``tests``: the fast test suite with CUDA visible, the ``gpu``-marked tests included.
- ``speed``: target tokens/s, model-FLOPs utilisation (:mod:`nmt.training.cost`) and peak memory of
  real training steps of ``configs/transformer.toml`` and ``configs/gru.toml``, at the
  config's batch and at the largest batch that fits (doubled until the GPU runs out of
  memory); compiled too where the step has the time to compile (:data:`COMPILE_SECONDS`),
  with torch.compile's default mode and with ``reduce-overhead`` (CUDA graphs); each beside
  the memory model's estimate, and with how many
  distinct batch shapes an epoch has and its padding (the Transformer with its config's
  ``train.pad_to_multiple`` and without: :mod:`nmt.data.fixed_shapes`).
- ``transformer``, ``gru``: ``nmt train`` of the config on the full corpus for what the step's
  share leaves after preparation and scoring, then ``nmt bleu`` greedy and beam 5 on the test
  split.
- ``decode``: the runs those two steps trained, decoding the test split greedy and beam 5 at
  several batch sizes: sentences/s.
- ``spans`` (only when asked for by name, in a command of its own): the software-strings
  measurement (:mod:`bench.software_strings`) of ``configs/transformer.toml`` trained on the
  GPU, on the prose and the software strings ``bundle --spans DIR`` put into the bundle, for
  what the step leaves after :data:`SPANS_RESERVE_SECONDS`: spans kept, span lines exact, lines
  invented, BLEU and chrF through nmt and CTranslate2. A GPU machine has no Argos Translate,
  so the Argos package comes back in parts (``DIR/spans-package.tar.00-of-NN``, ...: files of
  16 MiB at most travel back from a borrowed GPU machine), for ``python -m
  bench.software_strings argos --work W --unpack DIR`` to score through argostranslate where
  it is installed.

Where no CUDA device is visible every step is skipped, and says so in its files and on the
terminal (exit status 0, so a CPU-only CI stays green; ``--require-gpu`` makes it 1).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import CONFIGS, ROOT, software_strings
from bench.processes import ChildRun, child_env, run_child
from nmt.errors import NmtError

STEPS = ("tests", "speed", "transformer", "gru", "decode")  # "all", in this order
ON_REQUEST = ("spans",)  # run only when named
# The whole check fits one command of eight minutes: a GPU machine borrowed by the quarter hour,
# its start (one to two minutes) included, leaves the time to run it again.
CHECK_SECONDS = 480
SHARES = {"tests": 0.28, "speed": 0.2, "transformer": 0.25, "gru": 0.15, "decode": 0.12,
          "spans": 1.0}
COMPILE_SECONDS = 300  # a speed step shorter than this measures eager mode only
SCORING_SECONDS = 50  # a training step keeps this for data preparation and two nmt bleu
BUNDLE = ROOT / "build" / "gpu-bundle"
OUT = ROOT / "bench" / "out" / "gpu"
NO_CUDA = "no CUDA device is visible (torch.cuda.is_available() is False)"

# --- the bundle ------------------------------------------------------------------------------

# Not in the bundle: torch (the GPU machine's own CUDA build is the one to measure) and the
# linters (the check does not lint).
LEFT_OUT = {"torch", "ruff", "mypy"}
EXTRAS = ("dev", "ctranslate2")  # the tests need pytest and hypothesis; export, CTranslate2
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
PYTHON_VERSION = "3.12"


def normalize_name(name: str) -> str:
    """A project name as PEP 503 compares them: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """``"numpy>=1.24"`` -> ``"numpy"`` (the name before any version, extra or marker)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise NmtError(f"pyproject.toml: cannot read the requirement {requirement!r}")
    return normalize_name(match.group(1))


def bundle_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """nmt's dependencies and those of :data:`EXTRAS`, as pyproject.toml writes them, less
    :data:`LEFT_OUT`."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    wanted = list(project["dependencies"])
    for extra in EXTRAS:
        wanted += project["optional-dependencies"][extra]
    return [r for r in wanted if requirement_name(r) not in LEFT_OUT]


def read_present(path: Path) -> set[str]:
    """The project names of ``pip list --format=freeze`` (or one name a line)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise NmtError(f"--present {path}: cannot read ({e.strerror})") from None
    return {requirement_name(line) for line in lines
            if line.strip() and not line.lstrip().startswith("#")}


def wheel_name(path: Path) -> str:
    """The project a wheel file holds (the part of its file name before the first ``-``)."""
    return normalize_name(path.name.split("-", 1)[0])


def copy_spans_corpus(corpus: Path, dest: Path) -> list[str]:
    """The files of a software-strings corpus (``bench.software_strings corpus --out CORPUS``)
    that a measurement reads, copied into ``dest``; their names."""
    try:
        lang = json.loads((corpus / "corpus.json").read_text(encoding="utf-8"))["target"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NmtError(f"--spans {corpus}: no software-strings corpus there (corpus.json: "
                       f"{getattr(e, 'strerror', None) or e}); `python -m bench.software_strings "
                       "corpus --out DIR` makes one") from None
    names = software_strings.corpus_inputs(lang)
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (corpus / name).is_file():
            raise NmtError(f"--spans {corpus}: no {name} there")
        shutil.copyfile(corpus / name, dest / name)
    return names


def make_bundle(dest: Path, *, present: frozenset[str] | set[str] = frozenset(),
                corpus: Path | None = None, spans: Path | None = None,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Download the wheels into ``dest/wheels``, write ``dest/requirements.txt`` and copy the
    corpus zip (and the software strings of ``spans``, into ``dest/spans``); drop the wheels of
    projects in ``present``. Returns what the bundle holds."""
    if spans is not None:
        copy_spans_corpus(spans, dest / "spans")
    requirements = bundle_requirements()
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    (dest / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels),
           "--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp",
           *(f"--platform={p}" for p in PLATFORMS), "-r", str(dest / "requirements.txt")]
    log(f"pip download: {len(requirements)} requirements for CPython {PYTHON_VERSION}")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no error output"])[-1]
        raise NmtError(f"pip download: exited with status {done.returncode}: {tail[:300]}")
    left_out = []
    for wheel in sorted(wheels.glob("*.whl")):
        if wheel_name(wheel) in present:
            wheel.unlink()
            left_out.append(wheel.name)
    kept = sorted(wheels.glob("*.whl"))
    if corpus is not None:
        zip_path = corpus / "fra-eng.zip" if corpus.is_dir() else corpus
        if not zip_path.is_file():
            raise NmtError(f"--corpus {corpus}: no fra-eng.zip there")
        shutil.copyfile(zip_path, dest / "fra-eng.zip")
    manifest = {"python": PYTHON_VERSION, "platforms": list(PLATFORMS),
                "requirements": requirements, "wheels": [w.name for w in kept],
                "left_out_as_present": left_out,
                "megabytes": round(sum(w.stat().st_size for w in kept) / 1e6, 1),
                "corpus": (dest / "fra-eng.zip").is_file(),
                "spans": (dest / "spans" / "corpus.json").is_file()}
    (dest / "bundle.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    log(f"{dest}: {len(kept)} wheels, {manifest['megabytes']} MB"
        + (f" ({len(left_out)} left out as present)" if left_out else "")
        + (", the corpus" if manifest["corpus"] else ", no corpus (give --corpus)")
        + (", the software strings" if manifest["spans"] else ""))
    return manifest


# --- the check: shared pieces -----------------------------------------------------------------


class Step:
    """One step's clock, child-process output and result files."""

    def __init__(self, name: str, out: Path, log: Callable[[str], None],
                 seconds: float = CHECK_SECONDS) -> None:
        self.name, self.out, self.log, self.seconds = name, out, log, seconds
        self.start = time.perf_counter()
        self.transcript: list[str] = []

    def left(self) -> float:
        """Seconds left of the step's share of the check."""
        return self.seconds - (time.perf_counter() - self.start)

    def child(self, cmd: Sequence[str], timeout: float, threads: int | None = None) -> ChildRun:
        """Run ``cmd`` in the repository root for at most ``timeout`` seconds (and no longer
        than the step has left); its output goes to the step's log."""
        limit = max(1.0, min(timeout, self.left()))
        self.log(f"  $ {' '.join(cmd)}  (at most {limit:.0f} s)")
        child = run_child(cmd, env=child_env(threads), timeout=limit, poll=0.5)
        stopped = child.returncode != 0 and child.seconds >= limit
        self.transcript += [f"$ {' '.join(cmd)}", child.stdout, child.stderr,
                            f"-> status {child.returncode} in {child.seconds:.1f} s"
                            + (" (stopped at its time limit)" if stopped else "")]
        return child

    def write(self, result: dict[str, Any], table: str) -> dict[str, Any]:
        result.update(step=self.name, seconds=round(time.perf_counter() - self.start, 1))
        result["within_limit"] = result["seconds"] <= self.seconds + 5
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{self.name}.json").write_text(json.dumps(result, indent=1) + "\n",
                                                    encoding="utf-8")
        head = f"### gpu-check {self.name}: {result['status']}"
        if result.get("reason"):
            head += f": {result['reason']}"
        note = (f"{result['seconds']:.0f} s"
                + ("" if result["within_limit"] else f", OVER the {self.seconds:.0f} s it had"))
        where = result.get("machine", {})
        stamp = (f"{where.get('gpu', 'no GPU')}, torch {where.get('torch', '?')}, commit "
                 f"{where.get('commit', '?')}, {where.get('date', '?')}; {note}.")
        text = "\n".join([head, "", stamp, "", table]).rstrip() + "\n"
        (self.out / f"{self.name}.md").write_text(text, encoding="utf-8")
        if self.transcript:
            (self.out / "logs").mkdir(exist_ok=True)
            (self.out / "logs" / f"{self.name}.log").write_text("\n".join(self.transcript),
                                                                encoding="utf-8")
        self.log(text)
        return result


def gpu_machine() -> dict[str, Any]:
    """:func:`bench.machine.machine` and the GPU: name, memory, compute capability, CUDA."""
    import torch

    from bench.machine import machine

    info = machine()
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1),
                    capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda,
                    gpus=torch.cuda.device_count())
    return info


def last_json(child: ChildRun) -> dict[str, Any] | None:
    """The last stdout line of ``child`` that is a JSON object, or None."""
    rows = json_lines(child.stdout)
    return rows[-1] if rows else None


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object (a line cut short by a kill is skipped)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                rows.append(dict(json.loads(line)))
            except json.JSONDecodeError:
                continue
    return rows


def failure(child: ChildRun) -> str:
    """A child's failure in one line: its last line of error output."""
    lines = child.stderr.strip().splitlines() or child.stdout.strip().splitlines()
    return f"status {child.returncode}: " + (lines[-1][:300] if lines else "no output")


def prepare_data(config: str, data_dir: Path | None, step: Step) -> float:
    """Prepare (or load) the config's data before any timing; seconds taken."""
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare

    start = time.perf_counter()
    prepare(load_config(CONFIGS / f"{config}.toml").data, data_dir or default_data_dir(),
            log=step.log)
    return round(time.perf_counter() - start, 1)


def _f(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _gib(x: float | None) -> str:
    return "-" if x is None else f"{x / 2**30:.2f}"


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


# --- step: tests ------------------------------------------------------------------------------


def step_tests(step: Step, workers: int) -> tuple[dict[str, Any], str]:
    """The fast suite with CUDA visible (``-m "not slow"``: the gpu-marked tests run)."""
    import tempfile
    import xml.etree.ElementTree as ET

    with tempfile.TemporaryDirectory(prefix="nmt-gpu-tests-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider",
               f"--junitxml={junit}"]
        if workers > 1:
            cmd += ["-n", str(workers)]
        child = step.child(cmd, step.left() - 5, threads=1)
        if not junit.is_file():
            return ({"status": "error", "reason": f"pytest wrote no report ({failure(child)})"},
                    "")
        cases = []
        for case in ET.parse(junit).getroot().iter("testcase"):
            row: dict[str, Any] = {"test": f"{case.get('classname')}::{case.get('name')}",
                                   "outcome": "passed", "seconds": float(case.get("time") or 0)}
            for tag, outcome in (("failure", "failed"), ("error", "error"),
                                 ("skipped", "skipped")):
                found = case.find(tag)
                if found is not None:
                    row.update(outcome=outcome, message=found.get("message", "")[:300])
            cases.append(row)
    counts = {k: sum(c["outcome"] == k for c in cases)
              for k in ("passed", "failed", "error", "skipped")}
    gpu_cases = [c for c in cases if "test_gpu" in c["test"]]
    status = "passed" if child.returncode == 0 else "failed"
    not_passed = [c for c in cases if c["outcome"] in ("failed", "error")]
    result = {"status": status, "pytest_status": child.returncode, "counts": counts,
              "gpu_tests": gpu_cases, "not_passed": not_passed}
    table = ["| tests | passed | failed | errors | skipped |", "|---|---:|---:|---:|---:|",
             f"| fast suite, CUDA visible | {counts['passed']} | {counts['failed']} | "
             f"{counts['error']} | {counts['skipped']} |", "",
             "| tests/test_gpu.py | outcome |", "|---|---|"]
    table += [f"| {c['test'].split('::')[-1]} | {c['outcome']} |" for c in gpu_cases]
    table += [f"\nNot passed: {c['test']}: {c.get('message', '')}"
              for c in not_passed]
    return result, "\n".join(table)


# --- step: speed ------------------------------------------------------------------------------

# config, train.compile_mode ("" for eager), overrides, share of the step's time at most. The
# Transformer is measured with its config's train.pad_to_multiple (batch shapes that repeat)
# and without (the shapes its batches had before), eager, compiled, and compiled with CUDA
# graphs (which need the repeated shapes), so one check gives the before and after. The GRU's
# decoder is a loop over target positions, a graph per length: eager only.
UNPADDED = ("train.pad_to_multiple=0",)
SPEED_PLAN: tuple[tuple[str, str, tuple[str, ...], float], ...] = (
    ("transformer", "", (), 0.12), ("transformer", "", UNPADDED, 0.08),
    ("transformer", "default", (), 0.3), ("transformer", "reduce-overhead", (), 0.35),
    ("gru", "", (), 0.15))


def speed_child(config: Path, compile_mode: str, steps: int, warmup: int, doublings: int,
                data_dir: Path | None, device_name: str = "cuda",
                overrides: Sequence[str] = ()) -> None:
    """Inside the child: real training steps (:func:`nmt.training.loop.train_step`, the moving
    average too) at the config's batch, then at doubled batches until one runs out of memory, then
    at the largest that fitted; compiled with ``train.compile_mode`` unless ``compile_mode`` is
    empty. The timed batches are each run once first (with ``warmup`` more), so that a compiled
    graph or CUDA graph of every shape timed is built before the timing. Prints one JSON line
    per measurement as it is made. (On the CPU, ``device_name="cpu"``, the same runs without
    memory figures: what the tests try.)"""
    import gc
    import statistics

    import numpy as np
    import torch

    from bench.steps import training_steps
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.fixed_shapes import batch_shapes, distinct_shapes, padding_share
    from nmt.training.cost import mfu, training_flops_per_target_token, training_memory

    compiling = [f"train.compile_mode={compile_mode}"] if compile_mode else []
    cfg = load_config(config, [f"train.device={device_name}",
                               f"train.compile={str(bool(compile_mode)).lower()}", *compiling,
                               *overrides])
    t, device = cfg.train, torch.device(device_name)
    cuda = device.type == "cuda"
    trainer = training_steps(cfg, data_dir or default_data_dir(), device)
    tok, split, optimizer = trainer.prepared.tokenizer, trainer.split, trainer.state.optimizer
    batches, step = trainer.batches, (lambda group: trainer.step(group)[1])  # tokens
    src_len, tgt_len = split.src_lengths() + 1, split.tgt_lengths() + 1  # with <eos>
    name = torch.cuda.get_device_name(0) if cuda else "cpu"

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize()

    def measure(size: int, which: str) -> dict[str, Any]:
        listed = batches(size)  # a large batch makes few: they are taken again in turn
        timed = [listed[i % len(listed)] for i in range(steps)]
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for group in (listed[-warmup:] if warmup else []) + timed:
            step(group)
        synchronize()
        warm_s = time.perf_counter() - start
        times, tokens = [], 0
        for group in timed:
            begin = time.perf_counter()
            tokens += step(group)
            synchronize()
            times.append(time.perf_counter() - begin)
        timed_pairs = np.concatenate(timed)
        flops = training_flops_per_target_token(cfg.model, tok.tgt_vocab_size,
                                                float(src_len[timed_pairs].mean()),
                                                float(tgt_len[timed_pairs].mean()))
        per_s = tokens / sum(times)
        estimate = training_memory(cfg, tok.src_vocab_size, tok.tgt_vocab_size,
                                   joint_vocab=tok.joint, batch_tokens=size)
        lengths = (split.src_lengths(), split.tgt_lengths(), listed, t.pad_to_multiple,
                   cfg.data.truncate)
        return {"which": which, "compile_mode": compile_mode, "batch_size": size,
                "batch_by": t.batch_by,
                "pad_to_multiple": t.pad_to_multiple,
                # an epoch's batch shapes (pairs, source, target width): graphs built per shape
                "epoch_batches": len(listed),
                "epoch_distinct_shapes": distinct_shapes(batch_shapes(*lengths)),
                "epoch_padding_share": round(padding_share(*lengths), 4),
                "steps": len(times), "warmup_steps": warmup, "warmup_s": round(warm_s, 1),
                "step_s_median": round(statistics.median(times), 4),
                "target_tokens_per_s": round(per_s), "flops_per_token": flops,
                "mfu": mfu(per_s, flops, name),
                "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else None,
                "estimated_memory_bytes": round(estimate.total)}

    def free() -> None:
        """What an out-of-memory step left: its gradients and the allocator's cached blocks."""
        optimizer.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()

    def fits(size: int) -> bool:
        """Two steps of the batches of ``size`` with the most padded tokens, or an OOM."""
        listed = batches(size)
        heaviest = sorted(listed, key=lambda g: -(len(g) * int(src_len[g].max()
                                                               + tgt_len[g].max())))[:2]
        try:
            for group in heaviest:
                step(group)
            synchronize()
            return True
        except torch.OutOfMemoryError:
            free()
            return False

    print(json.dumps(measure(t.batch_size, "config")), flush=True)
    if trainer.state.ema is not None and not compile_mode:
        print(json.dumps(average_update_times(trainer.state.ema, trainer.state.model,
                                              synchronize)), flush=True)
    largest, oom_at = t.batch_size, None
    for _ in range(doublings):
        if not fits(2 * largest):
            oom_at = 2 * largest
            break
        largest *= 2
        print(json.dumps({"which": "fits", "batch_size": largest}), flush=True)
    print(json.dumps({"which": "search", "largest": largest, "out_of_memory_at": oom_at}),
          flush=True)
    # Two steps that fitted do not promise twenty: the allocator's fragments can make a later one
    # run out (an H100, the GRU at 256,000 tokens). Then the batch below it is measured instead.
    while largest != t.batch_size:
        try:
            print(json.dumps(measure(largest, "largest")), flush=True)
            break
        except torch.OutOfMemoryError:
            free()
            print(json.dumps({"which": "out of memory while measuring", "batch_size": largest}),
                  flush=True)
            largest //= 2


def average_update_times(ema: Any, model: Any, synchronize: Callable[[], None],
                         repeats: int = 20) -> dict[str, Any]:
    """Milliseconds (median) of the moving average's update as written (one multi-tensor
    lerp) and as it was before (one ``lerp_`` per parameter), the same arithmetic."""
    import statistics

    import torch

    def one_by_one() -> None:
        with torch.no_grad():
            for avg, w in zip(ema.model.parameters(), model.parameters(), strict=True):
                avg.lerp_(w.detach(), 1.0 - ema.rate())

    times: dict[str, list[float]] = {"foreach": [], "per_parameter": []}
    for _ in range(repeats + 2):  # the first two of each warm up
        for name, update in (("foreach", lambda: ema.update(model)),
                             ("per_parameter", one_by_one)):
            synchronize()
            begin = time.perf_counter()
            update()
            synchronize()
            times[name].append(time.perf_counter() - begin)
    return {"which": "average update",
            "parameters": sum(1 for _ in model.parameters()),
            **{f"{k}_ms": round(1000 * statistics.median(v[2:]), 3) for k, v in times.items()}}


def step_speed(step: Step, data_dir: Path | None, steps: int, warmup: int,
               doublings: int, device: str = "cuda") -> tuple[dict[str, Any], str]:
    prep = prepare_data("transformer", data_dir, step)  # gru.toml reads the same data
    rows: list[dict[str, Any]] = []
    problems = []
    compiling = step.left() >= COMPILE_SECONDS
    plan = [(c, k, o, share) for c, k, o, share in SPEED_PLAN if compiling or not k]
    whole = sum(share for *_, share in plan)
    budget = step.left()
    averaging: list[dict[str, Any]] = []
    for config, mode, overrides, share in plan:
        seconds = budget * share / whole
        cmd = [sys.executable, "-m", "bench.gpu", "speed-child", str(CONFIGS / f"{config}.toml"),
               "--steps", str(steps), "--warmup", str(warmup),
               "--doublings", str(doublings), "--device", device]
        if mode:
            cmd += ["--compile-mode", mode]
        for override in overrides:
            cmd += ["--set", override]
        if data_dir is not None:
            cmd += ["--data-dir", str(data_dir.resolve())]
        child = step.child(cmd, seconds)
        found = json_lines(child.stdout)
        measured = [dict(r, config=config, compile=mode) for r in found
                    if r.get("which") in ("config", "largest")]
        search = next((r for r in found if r.get("which") == "search"), None)
        averaging += [dict(r, config=config) for r in found if r.get("which") == "average update"
                      and not any(a["config"] == config for a in averaging)]
        rows += measured
        if child.returncode != 0 or search is None:
            problems.append(f"{config}{' compiled ' + mode if mode else ''}"
                            f"{''.join(' ' + o for o in overrides)}: {failure(child)}"
                            + ("" if measured else ", nothing measured"))
        for r in measured:
            if search is not None:
                r.update(largest=search["largest"], out_of_memory_at=search["out_of_memory_at"])
    result = {"status": "failed" if problems else "passed", "data_prepare_s": prep,
              "rows": rows, "average_update": averaging, "problems": problems,
              "compile_measured": compiling,
              "mfu_note": "MFU: achieved FLOP/s over the GPU's dense bf16 peak "
                          "(nmt.training.cost); '-' for a GPU not in its table"}
    table = ["| config | compile | pad to | shapes/epoch (padding) | batch (target tokens) | "
             "tokens/s | MFU | peak GiB | estimate GiB | s/step | warm-up s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        batch = f"{r['batch_size']:,}" + (" (largest)" if r["which"] == "largest" else "")
        table.append(f"| {r['config']} | {r['compile'] or 'no'} | "
                     f"{r['pad_to_multiple'] or 'off'} | {r['epoch_distinct_shapes']:,} "
                     f"({100 * r['epoch_padding_share']:.0f}%) | {batch} | "
                     f"{r['target_tokens_per_s']:,} | "
                     f"{_percent(r['mfu'])} | {_gib(r['peak_memory_bytes'])} | "
                     f"{_gib(r['estimated_memory_bytes'])} | "
                     f"{r['step_s_median']} | {r['warmup_s']} |")
    largest = sorted({(r["config"], r["compile"], r.get("pad_to_multiple"), r.get("largest"),
                       r.get("out_of_memory_at")) for r in rows}, key=str)
    table += ["", "Largest batch that fitted (out of memory at): " + "; ".join(
        f"{c}{' compiled ' + k if k else ''}{'' if m else ' unpadded'} {_f(b)} "
        f"({_f(o) if o else 'not reached'})" for c, k, m, b, o in largest)]
    table += [f"\nThe moving average's update ({r['config']}, {r['parameters']} parameters): "
              f"{r['foreach_ms']} ms as one multi-tensor lerp, {r['per_parameter_ms']} ms one "
              "parameter at a time" for r in averaging]
    if not compiling:
        table.append(f"\ntrain.compile not measured: the step had {budget:.0f} s, compiling "
                     f"takes a step of {COMPILE_SECONDS} s (`--seconds`).")
    table += [f"\nProblem: {p}" for p in problems]
    return result, "\n".join(table)


# --- steps: transformer, gru ------------------------------------------------------------------


def bleu(step: Step, run: Path, beam: int, batch_size: int | None = None,
         timeout: float = 120, device: str = "cuda",
         data_dir: Path | None = None) -> dict[str, Any]:
    """``nmt bleu --json`` of ``run`` on ``device``: the report, or the failure."""
    cmd = [sys.executable, "-m", "nmt", "bleu", "--run", str(run), "--device", device,
           "--beam", str(beam), "--json"]
    if batch_size is not None:
        cmd += ["--batch-size", str(batch_size)]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir.resolve())]
    child = step.child(cmd, timeout)
    report = last_json(child) if child.returncode == 0 else None
    if report is None:
        return {"beam": beam, "batch_size": batch_size, "error": failure(child)}
    return {"beam": beam, "batch_size": batch_size, "bleu_multi": report["multi"]["bleu"],
            "bleu_single": report["single"]["bleu"], "chrf_multi": report["multi"]["chrf"],
            "sentences": report["sentences"], "seconds": report["seconds"],
            "sentences_per_s": report["sentences_per_second"], "checkpoint_step": report["step"]}


def step_train(step: Step, config: str, data_dir: Path | None,
               device: str = "cuda") -> tuple[dict[str, Any], str]:
    """``nmt train`` on the full corpus for what the step has left after
    :data:`SCORING_SECONDS`, then greedy and beam-5 BLEU."""
    from nmt.runs.directory import read_metrics

    prep = prepare_data(config, data_dir, step)
    minutes = round(max(0.25, (step.left() - SCORING_SECONDS) / 60), 2)
    run = ROOT / "runs" / f"gpu-{config}"
    cmd = [sys.executable, "-m", "nmt", "train", "--config", str(CONFIGS / f"{config}.toml"),
           "--run-name", run.name, "--runs-dir", str(run.parent), "--overwrite",
           "--max-minutes", repr(minutes), "--set", f"train.device={device}"]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir.resolve())]
    child = step.child(cmd, step.left() - SCORING_SECONDS + 30)
    if child.returncode != 0:
        return {"status": "failed", "reason": f"nmt train: {failure(child)}",
                "data_prepare_s": prep}, ""
    records = read_metrics(run)
    trained = [r for r in records if "train_loss" in r]
    valid = [r for r in records if r.get("valid_bleu") is not None]
    summary = (child.stdout.strip().splitlines() or [""])[-1]
    speed = re.search(r"([\d,]+) tokens/sec", child.stdout)
    scores = [bleu(step, run, beam, device=device, data_dir=data_dir) for beam in (1, 5)]
    steps = software_strings.last_step(records)
    tokens_per_s = int(speed.group(1).replace(",", "")) if speed else None
    best = max((r["valid_bleu"] for r in valid), default=None)
    result = {"status": "failed" if any("error" in s for s in scores) else "passed",
              "config": f"configs/{config}.toml", "minutes": minutes, "data_prepare_s": prep,
              "train_wall_s": round(child.seconds, 1),
              "steps": steps, "tokens_per_s": tokens_per_s,
              "last_train_loss": trained[-1]["train_loss"] if trained else None,
              "best_valid_bleu": best,
              "train_summary": summary, "test": scores}
    table = [f"`nmt train --config configs/{config}.toml --max-minutes {minutes:g}`: "
             f"{_f(steps)} steps, {_f(tokens_per_s)} target tokens/s, best valid BLEU "
             f"{_f(best, 2)} (greedy, train.eval_sentences of the valid split); data "
             f"preparation {prep} s.", "",
             "| test split | BLEU, all refs | BLEU, one ref | chrF, all refs | sentences/s |",
             "|---|---:|---:|---:|---:|"]
    for s in scores:
        search = "greedy" if s["beam"] == 1 else f"beam {s['beam']}"
        table.append(f"| {search} | error: {s['error']} | | | |" if "error" in s else
                     f"| {search} | {s['bleu_multi']:.2f} | {s['bleu_single']:.2f} | "
                     f"{s['chrf_multi']:.2f} | {s['sentences_per_s']:,.0f} |")
    return result, "\n".join(table)


# --- step: decode -----------------------------------------------------------------------------

DECODE_BATCHES = (500, 2000, 100)  # in the order measured: the first is the default's size


def step_decode(step: Step, data_dir: Path | None = None,
                device: str = "cuda") -> tuple[dict[str, Any], str]:
    runs = [ROOT / "runs" / f"gpu-{c}" for c in ("transformer", "gru")]
    runs = [r for r in runs if (r / "checkpoints" / "best.pt").is_file()]
    if not runs:
        return {"status": "error", "reason": "no run trained by this check (runs/gpu-transformer, "
                "runs/gpu-gru): run STEP=transformer and STEP=gru first, on this machine"}, ""
    rows = []
    for size in DECODE_BATCHES:  # every run and search at one batch size before the next size
        for run in runs:
            for beam in (1, 5):
                if step.left() < 15:
                    rows.append({"run": run.name, "beam": beam, "batch_size": size,
                                 "skipped": "the step's time was spent"})
                    continue
                rows.append(dict(bleu(step, run, beam, size, timeout=90, device=device,
                                      data_dir=data_dir), run=run.name))
    result = {"status": "failed" if any("error" in r for r in rows) else "passed", "rows": rows}
    table = ["| run | search | batch | sentences/s | BLEU, all refs |", "|---|---|---:|---:|---:|"]
    for r in rows:
        search = "greedy" if r["beam"] == 1 else f"beam {r['beam']}"
        if "skipped" in r:
            table.append(f"| {r['run']} | {search} | {r['batch_size']} | not measured: "
                         f"{r['skipped']} | |")
            continue
        table.append(f"| {r['run']} | {search} | {r['batch_size']} | error: {r['error']} | |"
                     if "error" in r else
                     f"| {r['run']} | {search} | {r['batch_size']} | "
                     f"{r['sentences_per_s']:,.0f} | {r['bleu_multi']:.2f} |")
    return result, "\n".join(table)


# --- step: spans ------------------------------------------------------------------------------

# Kept from the training's minutes: preparing the data (SentencePiece on the mix), exporting,
# and scoring eight test sets through nmt and CTranslate2, with a margin.
SPANS_RESERVE_SECONDS = 210


def step_spans(step: Step, data_dir: Path | None, corpus: Path, device: str = "cuda",
               config: str = "transformer",
               settings: Sequence[str] = ()) -> tuple[dict[str, Any], str]:
    """``bench.software_strings measure`` of ``configs/CONFIG.toml`` on ``device`` in
    ``runs/gpu-spans``, trained for what the step leaves after :data:`SPANS_RESERVE_SECONDS`;
    its results, and the Argos package and test sets packed into the step's folder."""
    work = ROOT / "runs" / "gpu-spans"
    shutil.rmtree(work, ignore_errors=True)
    copy_spans_corpus(corpus, work)
    minutes = round(max(0.25, (step.left() - SPANS_RESERVE_SECONDS) / 60), 2)
    # auto: nmt on the GPU, and CTranslate2 too where its wheel's CUDA libraries are there
    # (else on the CPU, saying so), rather than a failed step
    cmd = [sys.executable, "-m", "bench.software_strings", "measure", "--work", str(work),
           "--config", str(CONFIGS / f"{config}.toml"),
           "--device", "auto" if device == "cuda" else device,
           "--argos-venv", str(work / "no-argos-here"),
           *(a for kv in [f"train.max_minutes={minutes!r}", *settings] for a in ("--set", kv))]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir.resolve())]
    child = step.child(cmd, step.left())
    if child.returncode != 0:
        return {"status": "failed", "reason": f"measure: {failure(child)}"}, ""
    results = json.loads((work / "results.json").read_text(encoding="utf-8"))
    parts = software_strings.pack(work, step.out)
    rows = [r for r in results["rows"] if r["engine"] != "argos"]
    result = {"status": "passed", "config": f"configs/{config}.toml", "minutes": minutes,
              "trained_steps": results["trained_steps"], "rows": rows,
              "filters": results["filters"], "parts": [p.name for p in parts],
              "parts_megabytes": round(sum(p.stat().st_size for p in parts) / 1e6, 1)}
    table = ((work / "results.md").read_text(encoding="utf-8") + "\n"
             f"The Argos package and the test sets: {len(parts)} part(s), "
             f"{result['parts_megabytes']} MB; where Argos Translate is installed: "
             "`python -m bench.software_strings argos --work DIR --unpack FOLDER`.")
    return result, table


# --- the check --------------------------------------------------------------------------------


def check(steps: Sequence[str], out: Path, *, bundle: Path = BUNDLE,
          data_dir: Path | None = None, seconds: float = CHECK_SECONDS, workers: int = 0,
          speed_steps: int = 20, speed_warmup: int = 3, doublings: int = 6,
          require_gpu: bool = False, device: str = "cuda", spans: Path | None = None,
          log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run ``steps`` in order within ``seconds``, shared by :data:`SHARES`; each writes
    ``out/STEP.json`` and ``out/STEP.md``.
    ``device="cpu"`` runs the steps' plumbing on the CPU (for trying it; figures mean little)."""
    import torch

    if not os.environ.get("NMT_DATA_MIRROR") and (bundle / "fra-eng.zip").is_file():
        os.environ["NMT_DATA_MIRROR"] = str(bundle / "fra-eng.zip")  # children inherit it
    info = gpu_machine()
    results = []
    for name in steps:
        whole = sum(SHARES[s] for s in steps)
        step = Step(name, out, log, seconds * SHARES[name] / whole)
        if device == "cuda" and not torch.cuda.is_available():
            results.append(step.write({"status": "skipped", "reason": NO_CUDA,
                                       "machine": info}, ""))
            continue
        log(f"gpu-check {name} on {info.get('gpu', device)}")
        try:
            if name == "tests":
                result, table = step_tests(step, workers or _default_workers())
            elif name == "speed":
                result, table = step_speed(step, data_dir, speed_steps, speed_warmup, doublings,
                                           device)
            elif name in ("transformer", "gru"):
                result, table = step_train(step, name, data_dir, device)
            elif name == "spans":
                result, table = step_spans(step, data_dir, spans or bundle / "spans", device)
            else:
                result, table = step_decode(step, data_dir, device)
        except NmtError as e:
            result, table = {"status": "error", "reason": str(e)}, ""
        results.append(step.write({**result, "machine": info}, table))
    if require_gpu and device == "cuda" and not torch.cuda.is_available():
        raise NmtError(f"--require-gpu: {NO_CUDA}")
    return results


def _default_workers() -> int:
    """pytest-xdist workers for the test step: 8 (or the CPUs, if fewer) where it is
    installed, else 1."""
    import importlib.util

    if importlib.util.find_spec("xdist") is None:
        return 1
    return max(1, min(8, os.cpu_count() or 1))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.gpu",
                                description="The GPU check and its bundle; see "
                                "docs/BENCHMARKS.md.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle", help="download the wheels a GPU machine without a registry "
                       "needs (all but torch)")
    b.add_argument("--dest", type=Path, default=BUNDLE)
    b.add_argument("--present", type=Path, default=None,
                   help="pip list --format=freeze of the GPU machine: leave those out")
    b.add_argument("--corpus", type=Path, default=None, help="fra-eng.zip or its folder")
    b.add_argument("--spans", type=Path, default=None, help="a software-strings corpus "
                   "(bench.software_strings corpus --out DIR) for the spans step")
    c = sub.add_parser("check", help="run the GPU check (make gpu-check)")
    c.add_argument("--step", default="all", help=f"all ({', '.join(STEPS)}), or one of "
                   f"those or {', '.join(ON_REQUEST)}")
    c.add_argument("--spans", type=Path, default=None, help="the software strings of the spans "
                   "step (default: the bundle's spans/)")
    c.add_argument("--out", type=Path, default=OUT)
    c.add_argument("--bundle", type=Path, default=BUNDLE, help="its fra-eng.zip is the corpus "
                   "when NMT_DATA_MIRROR is not set")
    c.add_argument("--data-dir", type=Path, default=None)
    c.add_argument("--seconds", type=float, default=CHECK_SECONDS,
                   help="the time of the whole check (the steps asked for share it)")
    c.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (0: 8 where "
                   "pytest-xdist is installed, else 1)")
    c.add_argument("--require-gpu", action="store_true",
                   help="exit with status 1 where no CUDA device is visible")
    c.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu: try the steps' plumbing without a GPU (figures mean little)")
    s = sub.add_parser("speed-child", help=argparse.SUPPRESS)
    s.add_argument("config", type=Path)
    s.add_argument("--compile-mode", default="", help="torch.compile's mode; empty: eager")
    s.add_argument("--steps", type=int, default=20)
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--doublings", type=int, default=6)
    s.add_argument("--data-dir", type=Path, default=None)
    s.add_argument("--device", default="cuda")
    s.add_argument("--set", action="append", default=[], help="section.key=value")
    args = p.parse_args(argv)
    try:
        if args.command == "bundle":
            present = read_present(args.present) if args.present is not None else set()
            mirror = os.environ.get("NMT_DATA_MIRROR")
            corpus = args.corpus or (Path(mirror) if mirror else None)
            make_bundle(args.dest, present=present, corpus=corpus, spans=args.spans)
        elif args.command == "check":
            steps = list(STEPS) if args.step == "all" else [args.step]
            if not set(steps) <= set(STEPS + ON_REQUEST):
                raise NmtError(f"--step {args.step}: expected all or one of "
                               f"{', '.join(STEPS + ON_REQUEST)}")
            if not 60 <= args.seconds <= 3600:
                raise NmtError(f"--seconds {args.seconds:g}: expected 60 to 3600")
            if args.workers < 0:
                raise NmtError(f"--workers {args.workers}: expected 0 or more")
            results = check(steps, args.out, bundle=args.bundle, data_dir=args.data_dir,
                            seconds=args.seconds, workers=args.workers,
                            require_gpu=args.require_gpu, device=args.device,
                            spans=args.spans)
            if any(r["status"] in ("failed", "error") for r in results):
                sys.exit(1)
        else:
            speed_child(args.config, args.compile_mode, args.steps, args.warmup, args.doublings,
                        args.data_dir, args.device, args.set)
    except NmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
