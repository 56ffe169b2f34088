"""Training speed side by side with OpenNMT-py (``python -m bench.peers``, ``make bench-peers``).

OpenNMT-py 3.5.x trains the same model as a config of ours (configs/demo.toml by default: a
Transformer of d_model 128, 4 heads, d_ff 512, 2+2 layers, pre-norm, shared embeddings, label
smoothing 0.1, ~3,000-target-token batches) on the same training pairs, encoded with the same
SentencePiece model: nmt's data cache for that config is written out as space-separated pieces,
and the pieces (less nmt's four specials, for which OpenNMT-py has its own) are its vocabulary.
Both sides run ``--threads`` threads each (one by default), alternated ``--repeats`` times,
``--warmup`` steps left out and ``--steps`` timed; the table gives each side's steady target
tokens/s, their ratio, the FLOP/s they make (:mod:`nmt.training.cost`; both train the same
FLOPs per token) and every setting that differs (:data:`DIFFERENCES`).

OpenNMT-py lives in its own virtual environment (``--venv``, build/onmt-venv), made on first
use: OpenNMT-py 3.5.1 pins ``torch<2.3``, which would pull a multi-GB CUDA build, so the CPU
torch (``TORCH_CPU``, ``TORCH_INDEX`` as in the Makefile) is installed first, then OpenNMT-py
without its dependencies and only those it imports to train (:data:`PEER_DEPS`). Two of its
text transforms import spacy and fasttext at module level and are never used here: empty
stand-ins (:data:`STUBS`) are put on its path instead of installing them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import CONFIGS, ROOT
from bench.processes import child_env, run_child
from bench.training import CPU_OVERRIDES, measure_train
from nmt.config import Config
from nmt.errors import NmtError

PEER = "OpenNMT-py==3.5.1"
# What OpenNMT-py 3.5.1 imports to train (its onmt.inputters, onmt.transforms, onmt.utils);
# the rest of its requirements (ctranslate2, tensorboard, flask, waitress, spacy, fasttext)
# serve translation servers, exports and transforms this benchmark does not use.
PEER_DEPS = ("pyonmttok>=1.37,<2", "configargparse", "pyyaml", "numpy", "sentencepiece",
             "sacrebleu", "rapidfuzz", "pyahocorasick", "six", "safetensors")
STUBS = ("spacy", "fasttext")  # imported at module level by transforms left unused
VENV = ROOT / "build" / "onmt-venv"
WORK = ROOT / "build" / "peers"

# What differs between the two sides beyond what the config sets alike (both: the model's
# sizes, pre-norm, sinusoidal positions, tied embeddings and output layer, dropout 0.1 also on
# the attention weights, label smoothing, gradient clipping, the learning-rate schedule's shape
# and peak, one thread, fp32).
DIFFERENCES = (
    "timed step: nmt's train_step (building the batch's tensors from its index group, forward, "
    "backward, update); OpenNMT-py's Trainer._gradient_accumulation (forward, backward, update; "
    "its iterator builds the batch before)",
    "batches: nmt fills 3,000 padded target tokens (pairs x (longest target + 1)); OpenNMT-py "
    "3,000 padded tokens of the longer side (pairs x longest of source and target) from buckets "
    "of sorted examples, and leaves a source out of a batch that already has it; target "
    "tokens/step says what each side got",
    "optimizer: nmt AdamW (weight decay 0, the fused kernel where torch has one); OpenNMT-py "
    "Adam (torch.optim.Adam, its defaults); same betas, eps",
    "schedule: nmt inverse_sqrt (linear warm-up to lr, then 1/sqrt(step)); OpenNMT-py noam with "
    "learning_rate = lr x sqrt(d_model x warmup_steps), the same curve",
    "vocabulary: the same SentencePiece pieces; nmt's <unk> <pad> <bos> <eos> are OpenNMT-py's "
    "own <unk> <blank> <s> </s>",
    "loss: nmt's label-smoothed cross-entropy as one function on the CPU (in fp32 with the "
    "output layer, 512 target positions at a time); OpenNMT-py's generator (log-softmax) then "
    "its label-smoothed loss",
    "torch: OpenNMT-py 3.5.1 asks for torch < 2.3; both run the same torch here (its pin lifted)",
)


def peer_options(cfg: Config, src: Path, tgt: Path, vocab: Path, vocab_size: int,
                 save_dir: Path, steps: int, seed: int = 1,
                 valid: tuple[Path, Path] | None = None, eval_every: int = 0) -> dict[str, Any]:
    """onmt_train's options for training ``cfg``'s Transformer for ``steps`` steps on the
    piece files ``src`` / ``tgt`` with the shared vocabulary ``vocab``, no checkpoint before the
    last step, and no validation, or one on the piece files ``valid`` every ``eval_every``
    steps. A config OpenNMT-py cannot match gets an NmtError."""
    m, t = cfg.model, cfg.train
    unmatched = [what for what, ok in (
        ("model.arch = transformer", m.arch == "transformer"),
        ("model.norm_first = true (OpenNMT-py's layers are pre-norm)",
         getattr(m, "norm_first", False)),  # a Transformer setting
        ("model.tie_embeddings = true with data.joint_vocab = true",
         m.tie_embeddings and cfg.data.joint_vocab),
        ("data.tokenizer = sentencepiece", cfg.data.tokenizer == "sentencepiece"),
        ("train.batch_by = tokens", t.batch_by == "tokens"),
        ("train.accum_steps = 1", t.accum_steps == 1),
        ("train.optimizer adam or adamw without weight decay",
         t.optimizer in ("adam", "adamw") and not t.weight_decay),
        ("train.ema_decay = 0", not t.ema_decay),
    ) if not ok]
    if unmatched:
        raise NmtError(f"--config: OpenNMT-py is compared on configs with {'; '.join(unmatched)}")
    if t.schedule == "inverse_sqrt" and t.warmup_steps > 0:
        # noam: lr x d^-0.5 x min(step^-0.5, step x warmup^-1.5) peaks at lr x (d warmup)^-0.5
        schedule = {"decay_method": "noam", "warmup_steps": t.warmup_steps,
                    "learning_rate": t.lr * (m.d_model * t.warmup_steps) ** 0.5}
    else:
        schedule = {"decay_method": "none", "learning_rate": t.lr}
    return {
        "save_data": str(save_dir), "save_model": str(save_dir / "model"),
        "overwrite": True, "src_vocab": str(vocab), "share_vocab": True,
        "src_vocab_size": vocab_size, "tgt_vocab_size": vocab_size, "vocab_size_multiple": 1,
        "data": {"corpus_1": {"path_src": str(src), "path_tgt": str(tgt)},
                 **({"valid": {"path_src": str(valid[0]), "path_tgt": str(valid[1])}}
                    if valid else {})},
        "skip_empty_level": "silent",
        "train_steps": steps, "save_checkpoint_steps": steps,
        "valid_steps": eval_every if valid and eval_every else 10 * steps + 1,
        "valid_batch_size": t.batch_size,
        "report_every": max(1, steps // 5), "seed": seed, "world_size": 1, "gpu_ranks": [],
        "num_workers": 0, "model_dtype": "fp32",
        "batch_type": "tokens", "batch_size": t.batch_size, "accum_count": [1],
        "normalization": "tokens",
        "model_task": "seq2seq", "encoder_type": "transformer", "decoder_type": "transformer",
        "enc_layers": m.n_layers, "dec_layers": m.n_layers, "hidden_size": m.d_model,
        "word_vec_size": m.d_model, "transformer_ff": m.d_ff, "heads": m.n_heads,
        "position_encoding": True, "max_relative_positions": 0,
        "share_embeddings": True, "share_decoder_embeddings": True,
        "dropout": [m.dropout], "attention_dropout": [m.dropout],
        "label_smoothing": t.label_smoothing, "max_grad_norm": t.clip_norm or 0.0,
        "optim": "adam", "adam_beta1": t.beta1, "adam_beta2": t.beta2,
        "param_init": 0.0, "param_init_glorot": True, **schedule,
    }


# --- OpenNMT-py's environment and data --------------------------------------------------------


def ensure_peer(venv: Path, log: Callable[[str], None] = print) -> tuple[Path, Path]:
    """OpenNMT-py's Python in ``venv`` and the folder of stand-ins for its path, installing
    both when ``import onmt.bin.train`` does not work there yet."""
    python, stubs = venv / "bin" / "python", venv / "stubs"
    for name in STUBS:
        (stubs / name).mkdir(parents=True, exist_ok=True)
        (stubs / name / "__init__.py").write_text(
            '"""An empty stand-in: bench.peers uses no transform that needs this package."""\n',
            encoding="utf-8")
    env = {**child_env(1), "PYTHONPATH": str(stubs)}
    check = [str(python), "-c", "import onmt.bin.train"]
    if python.exists() and subprocess.run(check, env=env, capture_output=True).returncode == 0:
        return python, stubs
    log(f"  installing {PEER} into {venv} (CPU torch first; a few minutes)")
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        _pip([base, "-m", "venv", str(venv)], "creating the virtual environment")
    torch_spec = os.environ.get("TORCH_CPU", "torch==2.13.0")
    index = os.environ.get("TORCH_INDEX", "")
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    _pip([*pip, torch_spec, *(["--index-url", index] if index else [])], torch_spec)
    _pip([*pip, "--no-deps", PEER], PEER)
    _pip([*pip, *PEER_DEPS], "OpenNMT-py's dependencies")
    done = subprocess.run(check, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no error output"])[-1]
        raise NmtError(f"{venv}: OpenNMT-py does not import after installing: {tail[:300]}")
    return python, stubs


def _pip(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no error output"])[-1]
        raise NmtError(f"installing {what} failed: {tail[:300]}")


def write_pieces(cfg: Config, data_dir: Path | None, dest: Path,
                 log: Callable[[str], None] = print) -> dict[str, Any]:
    """nmt's training and validation splits of ``cfg`` as space-separated SentencePiece pieces
    (``train.src``, ``train.tgt``, ``valid.src``, ``valid.tgt``) and the pieces as a vocabulary
    (``vocab.txt``), in ``dest``; written once per cache (``dest/pieces.json`` names it)."""
    import sentencepiece as spm

    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare
    from nmt.data.tokenizers import SPECIALS

    prepared = prepare(cfg.data, data_dir or default_data_dir(), log=log)
    record = dest / "pieces.json"
    key = {"cache": str(prepared.cache_dir), "digest": prepared.digest, "splits": "train valid",
           "record": 2}  # what the record holds: 2 with valid_pairs
    if record.is_file() and json.loads(record.read_text(encoding="utf-8")).get("key") == key:
        return dict(json.loads(record.read_text(encoding="utf-8")))
    sp = spm.SentencePieceProcessor(model_file=str(prepared.cache_dir / "spm.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    if any(len(p.split()) != 1 for p in pieces):
        raise NmtError(f"{prepared.cache_dir}/spm.model: a piece holds white space; "
                       "OpenNMT-py's files split on it")
    split = prepared.splits["train"]
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("train", "valid"):
        part = prepared.splits[name]
        for side, ids, offsets in (("src", part.src_ids, part.src_offsets),
                                   ("tgt", part.tgt_ids, part.tgt_offsets)):
            with open(dest / f"{name}.{side}", "w", encoding="utf-8") as f:
                for i in range(len(offsets) - 1):
                    f.write(" ".join(pieces[j] for j in ids[offsets[i]:offsets[i + 1]]) + "\n")
    (dest / "vocab.txt").write_text("".join(p + "\n" for p in pieces[len(SPECIALS):]),
                                    encoding="utf-8")
    info = {"key": key, "pairs": len(split), "valid_pairs": len(prepared.splits["valid"]),
            "vocab_size": len(pieces),
            "tgt_vocab_size": prepared.tokenizer.tgt_vocab_size,
            "src_mean": float(split.src_lengths().mean()) + 1,
            "tgt_mean": float(split.tgt_lengths().mean()) + 1}
    record.write_text(json.dumps(info), encoding="utf-8")
    return info


# --- the comparison ---------------------------------------------------------------------------


def measure_peer(python: Path, stubs: Path, options: dict[str, Any], warmup: int,
                 prefix: Sequence[str] = (), threads: int = 1) -> dict[str, Any]:
    """One OpenNMT-py run (:mod:`bench.onmt_child`) on ``threads`` threads: its figures, wall
    seconds and peak RSS."""
    with tempfile.TemporaryDirectory(prefix="nmt-peers-") as tmp:
        run_options = {**options, "save_data": tmp, "save_model": f"{tmp}/model"}
        config = Path(tmp) / "config.yaml"
        config.write_text(json.dumps(run_options, indent=1), encoding="utf-8")  # JSON is YAML
        child = run_child([*prefix, str(python), "-m", "bench.onmt_child", str(config),
                           "--warmup", str(warmup), "--threads", str(threads)],
                          env={**child_env(threads), "PYTHONPATH": str(stubs)})
    row = child.last_json("OpenNMT-py")
    row.update(wall_s=round(child.seconds, 1), peak_rss_mb=round(child.peak_rss_mb))
    return row


def alternated(repeats: int, ours: Callable[[], dict[str, Any]],
               peer: Callable[[], dict[str, Any]], said: Callable[[dict[str, Any]], str],
               log: Callable[[str], None]) -> dict[str, list[dict[str, Any]]]:
    """``repeats`` runs of each side, nmt first in even rounds and OpenNMT-py first in odd
    ones, so that a machine's drift falls on both; each run logged with ``said(row)``."""
    runs: dict[str, list[dict[str, Any]]] = {"nmt": [], "onmt": []}
    for i in range(repeats):
        for side in ("nmt", "onmt") if i % 2 == 0 else ("onmt", "nmt"):
            row = ours() if side == "nmt" else peer()
            runs[side].append(row)
            log(f"  {side}: {row['steps']} steps, {said(row)}")
    return runs


def compare(config: Path, *, steps: int, warmup: int, repeats: int, venv: Path = VENV,
            data_dir: Path | None = None, cpu: int | None = None, precision: str = "auto",
            threads: int = 1, log: Callable[[str], None] = print) -> dict[str, Any]:
    """nmt and OpenNMT-py on ``config``'s model and data, ``threads`` threads each, alternated
    ``repeats`` times; nmt in ``precision`` (``train.precision``), OpenNMT-py in fp32 (it has no
    other on a CPU)."""
    from nmt.config import load_config
    from nmt.training.cost import this_cpu_fp32_peak, training_flops_per_target_token

    cfg = load_config(config)
    python, stubs = ensure_peer(venv, log)
    work = WORK / config.stem
    pieces = write_pieces(cfg, data_dir, work, log)
    total = warmup + steps
    options = peer_options(cfg, work / "train.src", work / "train.tgt", work / "vocab.txt",
                           pieces["vocab_size"], work / "run", total, seed=cfg.train.seed)
    prefix = ["taskset", "-c", str(cpu)] if cpu is not None else []
    ours_overrides = [*CPU_OVERRIDES, f"train.precision={precision}",
                      f"train.threads={threads}", f"train.max_steps={total}"]
    runs = alternated(
        repeats,
        lambda: measure_train(config, ours_overrides, stop_after=total, warmup=warmup,
                              data_dir=data_dir, prefix=prefix, threads=threads),
        lambda: measure_peer(python, stubs, options, warmup, prefix, threads=threads),
        lambda row: f"steady {row['steady_tokens_per_sec'] or 0:,.0f} target tokens/s", log)
    flops = training_flops_per_target_token(cfg.model, pieces["tgt_vocab_size"],
                                            pieces["src_mean"], pieces["tgt_mean"])
    peak = this_cpu_fp32_peak(threads)
    return {"config": config.name, "steps": steps, "warmup": warmup, "repeats": repeats,
            "cpu": cpu, "threads": threads, "precision": nmt_precision(precision), "runs": runs,
            "flops_per_token": flops,
            "cpu_peak_flops": peak.flops if peak else None,
            "cpu_peak": peak.describe() if peak else None,
            "onmt_options": options, "differences": list(DIFFERENCES)}


def nmt_precision(precision: str) -> str:
    """What ``train.precision = precision`` trains in on this CPU, and why
    (:func:`nmt.device.precision_said`, as the training log says it)."""
    import torch

    from nmt.device import precision_said

    return precision_said(torch.device("cpu"), precision).removeprefix("precision: ")


# --- time to quality --------------------------------------------------------------------------


def time_to_quality(config: Path, *, steps: int, eval_every: int, threads: int = 2,
                    repeats: int = 1, precision: str = "auto", venv: Path = VENV,
                    data_dir: Path | None = None,
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """nmt and OpenNMT-py each train ``config``'s model for ``steps`` steps on ``threads``
    threads, alternated ``repeats`` times, scoring the same validation pairs every
    ``eval_every`` steps; the seconds of training (validation left out) each took to reach the
    validation loss both reached (:func:`reached`)."""
    from nmt.config import load_config

    if eval_every < 1 or steps < eval_every:
        raise NmtError(f"--eval-every {eval_every}: expected 1 to --steps ({steps})")
    cfg = load_config(config)
    python, stubs = ensure_peer(venv, log)
    work = WORK / config.stem
    pieces = write_pieces(cfg, data_dir, work, log)
    options = peer_options(cfg, work / "train.src", work / "train.tgt", work / "vocab.txt",
                           pieces["vocab_size"], work / "run", steps, seed=cfg.train.seed,
                           valid=(work / "valid.src", work / "valid.tgt"),
                           eval_every=eval_every)
    ours_overrides = [*CPU_OVERRIDES, f"train.precision={precision}", f"train.threads={threads}",
                      f"train.max_steps={steps}", f"train.eval_every={eval_every}",
                      "train.eval_sentences=-1", "train.patience=0"]
    def said(row: dict[str, Any]) -> str:
        last = row["valid"][-1] if row.get("valid") else {}
        return (f"{len(row.get('valid', []))} validations, last valid loss "
                f"{last.get('valid_loss', float('nan')):.3f} after "
                f"{last.get('train_s', float('nan')):.0f} s of training")

    runs = alternated(
        repeats, lambda: measure_train(config, ours_overrides, data_dir=data_dir, threads=threads),
        lambda: measure_peer(python, stubs, options, 0, threads=threads), said, log)
    result = {"config": config.name, "steps": steps, "eval_every": eval_every,
              "threads": threads, "repeats": repeats, "precision": nmt_precision(precision),
              "valid_pairs": pieces["valid_pairs"], "runs": runs,
              "onmt_options": options, "differences": list(DIFFERENCES)}
    result.update(reached(runs))
    return result


def reached(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The target: the highest of the two sides' lowest validation losses (a loss both
    reached), and for each run the training seconds at its first validation at or below it;
    ``speedup``: OpenNMT-py's seconds over nmt's, each side's fastest run."""
    lowest = {side: min((v["valid_loss"] for r in rows for v in r.get("valid", [])),
                        default=None) for side, rows in runs.items()}
    if any(x is None for x in lowest.values()):
        return {"target_loss": None, "seconds_to_target": {}, "speedup": None}
    target = max(x for x in lowest.values() if x is not None)
    seconds = {side: [next((v["train_s"] for v in r.get("valid", [])
                            if v["valid_loss"] <= target), None) for r in rows]
               for side, rows in runs.items()}
    fastest = {side: min((x for x in xs if x is not None), default=None)
               for side, xs in seconds.items()}
    ours, peer = fastest["nmt"], fastest["onmt"]
    return {"target_loss": target, "seconds_to_target": seconds,
            "speedup": peer / ours if ours and peer else None}


def quality_markdown(result: dict[str, Any]) -> str:
    """:func:`time_to_quality`'s result: each validation of each run, then the time to the
    target loss."""
    out = ["| step | " + " | ".join(
        f"{name} run {i + 1}: valid loss (training s)"
        for side, name in (("nmt", "nmt"), ("onmt", "OpenNMT-py"))
        for i in range(len(result["runs"][side]))) + " |"]
    columns = [r for side in ("nmt", "onmt") for r in result["runs"][side]]
    out.append("|---:|" + "---:|" * len(columns))
    steps = sorted({v["step"] for r in columns for v in r.get("valid", [])})
    for step in steps:
        cells = []
        for r in columns:
            v = next((v for v in r.get("valid", []) if v["step"] == step), None)
            cells.append(f"{v['valid_loss']:.3f} ({v['train_s']:.0f})" if v else "-")
        out.append(f"| {step:,} | " + " | ".join(cells) + " |")
    out.append("")
    for side, name in (("nmt", "nmt"), ("onmt", "OpenNMT-py")):
        rows = result["runs"][side]
        each = ", ".join(f"{r['steady_tokens_per_sec'] or 0:,.0f}" for r in rows)
        walls = ", ".join(f"{r['wall_s']:.0f}" for r in rows)
        out.append(f"- {name}: target tokens/s {each}; wall seconds (validation, start and "
                   f"data loading included) {walls}")
    target, speedup = result["target_loss"], result["speedup"]
    if target is None:
        out.append("- no validation loss on one side: no time to quality")
    else:
        secs = result["seconds_to_target"]
        out.append(f"- target: valid loss {target:.3f} (the higher of the two sides' lowest); "
                   "training seconds to reach it: "
                   + "; ".join(f"{n} " + ", ".join("not reached" if x is None else f"{x:.0f}"
                                                   for x in secs[side])
                               for side, n in (("nmt", "nmt"), ("onmt", "OpenNMT-py"))))
        out.append("- nmt / OpenNMT-py, time to the target: "
                   + (f"**{speedup:.2f}x** faster" if speedup else "-"))
    out += ["", f"{result['config']}'s model and data, {result['steps']:,} steps, validation "
            f"every {result['eval_every']:,} steps on the same {result['valid_pairs']:,} pairs "
            "(per-token cross-entropy without label smoothing, both sides), "
            f"{result['threads']} threads each, {result['repeats']} run(s) per side "
            f"alternated; nmt in {result['precision']}, OpenNMT-py in fp32. What differs:", ""]
    out += [f"- {d}" for d in result["differences"]]
    return "\n".join(out)


def best(rows: list[dict[str, Any]]) -> float:
    """A side's best steady tokens/s over its runs (the least disturbed one)."""
    return max((r["steady_tokens_per_sec"] or 0.0) for r in rows)


def ratio(result: dict[str, Any]) -> float | None:
    """nmt's best steady tokens/s over OpenNMT-py's (None when OpenNMT-py has no figure)."""
    peer = best(result["runs"]["onmt"])
    return best(result["runs"]["nmt"]) / peer if peer > 0 else None


def markdown(result: dict[str, Any]) -> str:
    """:func:`compare`'s result as a Markdown table and the settings that differ."""
    from bench.training import compute_cells

    out = ["| toolkit | steady target tokens/s, each run | best | target tokens/step "
           "| MFLOP/token | GFLOP/s, best | % of fp32 peak | peak RSS MB |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for side, name in (("nmt", "nmt"), ("onmt", f"OpenNMT-py {_peer_version(result)}")):
        rows = result["runs"][side]
        fastest = best(rows)
        per_step = sum(r["tokens"] for r in rows) / max(sum(r["steps"] for r in rows), 1)
        each = ", ".join(f"{r['steady_tokens_per_sec'] or 0:,.0f}" for r in rows)
        out.append(f"| {name} | {each} | {fastest:,.0f} | {per_step:,.0f} | "
                   f"{compute_cells(result, fastest)} | "
                   f"{max(r['peak_rss_mb'] for r in rows):,} |")
    r = ratio(result)
    out += ["", f"nmt / OpenNMT-py: **{r:.2f}x**" if r else "nmt / OpenNMT-py: -", "",
            f"{result['config']}'s model and training pairs, "
            + _threads_said(result.get("threads", 1)) + " each, nmt in "
            f"{result.get('precision', 'fp32')} and OpenNMT-py in fp32"
            + (f" pinned to CPU {result['cpu']}" if result["cpu"] is not None else "")
            + f", {result['repeats']} alternating runs per side of {result['warmup']} warm-up "
            f"+ {result['steps']} timed steps; steady: target tokens over the timed steps' "
            "seconds. % of fp32 peak: of the cores used ("
            + (result["cpu_peak"] or "not known for this CPU") + "). What differs:", ""]
    out += [f"- {d}" for d in result["differences"]]
    return "\n".join(out)


def _threads_said(threads: int) -> str:
    return "one thread" if threads == 1 else f"{threads} threads"


def _peer_version(result: dict[str, Any]) -> str:
    rows = result["runs"]["onmt"]
    return str(rows[0].get("onmt", "")) if rows else ""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, default=CONFIGS / "demo.toml")
    p.add_argument("--steps", type=int, default=None, help="timed steps per run (150); with "
                   "--quality, the steps each side trains (the config's train.max_steps)")
    p.add_argument("--warmup", type=int, default=20, help="leading steps left out")
    p.add_argument("--repeats", type=int, default=None,
                   help="runs per side, alternated (2; with --quality, 1)")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                   help="nmt's train.precision (OpenNMT-py trains in fp32 on a CPU)")
    p.add_argument("--quality", action="store_true", help="time to the same validation loss "
                   "instead of training speed: bench/out/peers-quality.md")
    p.add_argument("--eval-every", type=int, default=100,
                   help="with --quality: validate every N steps")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per side (1; with --quality, 2)")
    p.add_argument("--venv", type=Path, default=VENV, help="OpenNMT-py's virtual environment")
    p.add_argument("--data-dir", type=Path, default=None, help="nmt's corpus and cache folder")
    p.add_argument("--cpu", type=int, default=None, help="pin both sides to this CPU (taskset)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = p.parse_args(argv)
    repeats = args.repeats or (1 if args.quality else 2)
    threads = args.threads if args.threads is not None else (2 if args.quality else 1)
    if (args.steps is not None and args.steps < 1) or args.warmup < 0 or repeats < 1 \
            or threads < 1:
        p.error("--steps, --repeats and --threads must be >= 1, --warmup >= 0")
    if args.cpu is not None and threads > 1:
        p.error("--cpu pins both sides to one CPU: it takes --threads 1")
    if args.cpu is not None and shutil.which("taskset") is None:
        p.error("--cpu needs taskset (util-linux)")
    try:
        if args.quality:
            from nmt.config import load_config

            steps = args.steps or load_config(args.config).train.max_steps
            result = time_to_quality(args.config, steps=steps, eval_every=args.eval_every,
                                     threads=threads, repeats=repeats,
                                     precision=args.precision, venv=args.venv.resolve(),
                                     data_dir=args.data_dir)
        else:
            result = compare(args.config, steps=args.steps or 150, warmup=args.warmup,
                             repeats=repeats, venv=args.venv.resolve(),
                             data_dir=args.data_dir, cpu=args.cpu, precision=args.precision,
                             threads=threads)
    except NmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    from bench.machine import machine

    result["machine"] = machine()
    text = quality_markdown(result) if args.quality else markdown(result)
    name = "peers-quality" if args.quality else "peers"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    (args.out / f"{name}.md").write_text(text + "\n", encoding="utf-8")
    print(text)

if __name__ == "__main__":
    main()
