"""bench/peers.py without OpenNMT-py: the config it is given, the table and the ratio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import bench.peers as peers
from nmt.config import load_config
from nmt.errors import NmtError

DEMO = Path(__file__).resolve().parents[1] / "configs" / "demo.toml"


def options(*overrides: str) -> dict[str, Any]:
    cfg = load_config(DEMO, list(overrides))
    return peers.peer_options(cfg, Path("/d/train.src"), Path("/d/train.tgt"),
                              Path("/d/vocab.txt"), 4000, Path("/d/run"), 170)


def test_demo_config_becomes_the_same_model_and_batches_in_opennmt() -> None:
    o = options()
    assert (o["enc_layers"], o["dec_layers"], o["hidden_size"], o["word_vec_size"],
            o["transformer_ff"], o["heads"]) == (2, 2, 128, 128, 512, 4)
    assert o["share_vocab"] and o["share_embeddings"] and o["share_decoder_embeddings"]
    assert o["label_smoothing"] == 0.1 and o["dropout"] == [0.1] == o["attention_dropout"]
    assert (o["batch_type"], o["batch_size"], o["accum_count"]) == ("tokens", 3000, [1])
    assert o["max_grad_norm"] == 1.0 and (o["adam_beta1"], o["adam_beta2"]) == (0.9, 0.98)
    assert o["train_steps"] == 170 and o["valid_steps"] > 170 and o["gpu_ranks"] == []
    assert o["data"] == {"corpus_1": {"path_src": "/d/train.src", "path_tgt": "/d/train.tgt"}}
    # noam, lr x d^-0.5 x min(step^-0.5, step x warmup^-1.5), peaks at the warm-up's end at
    # nmt's lr, as inverse_sqrt does
    assert o["decay_method"] == "noam" and o["warmup_steps"] == 200

    def noam(step: int) -> float:
        return float(o["learning_rate"] * 128 ** -0.5
                     * min(step ** -0.5, step * o["warmup_steps"] ** -1.5))

    assert noam(200) == pytest.approx(0.003) and noam(800) == pytest.approx(0.0015)
    assert options("train.schedule=constant")["decay_method"] == "none"


def test_a_config_opennmt_cannot_match_is_refused_naming_what() -> None:
    with pytest.raises(NmtError, match=r"model.arch = transformer.*train.ema_decay = 0"):
        peers.peer_options(load_config(None, ["model.arch=gru", "train.ema_decay=0.999"]),
                           Path("/d/train.src"), Path("/d/train.tgt"), Path("/d/vocab.txt"),
                           4000, Path("/d/run"), 170)
    with pytest.raises(NmtError, match=r"^--config: .*model.norm_first = true \(OpenNMT"):
        options("model.norm_first=false")


def run(tokens_per_sec: float, steps: int = 5, tokens: int = 15000) -> dict[str, Any]:
    return {"steady_tokens_per_sec": tokens_per_sec, "steps": steps, "tokens": tokens,
            "peak_rss_mb": 700, "onmt": "3.5.1"}


def test_table_gives_both_speeds_the_ratio_and_what_differs() -> None:
    result = {"config": "demo.toml", "steps": 150, "warmup": 20, "repeats": 2, "cpu": 0,
              "runs": {"nmt": [run(4700), run(4800)], "onmt": [run(4500), run(4000)]},
              "flops_per_token": 8.5e6, "cpu_peak_flops": 78.4e9, "cpu_peak": "78 GFLOP/s = x",
              "differences": list(peers.DIFFERENCES)}
    assert peers.best(result["runs"]["nmt"]) == 4800
    assert peers.ratio(result) == pytest.approx(4800 / 4500)
    table = peers.markdown(result)
    assert "| nmt | 4,700, 4,800 | 4,800 | 3,000 | 8.50 | 40.8 | 52.0% | 700 |" in table
    assert "| OpenNMT-py 3.5.1 | 4,500, 4,000 | 4,500 |" in table
    assert "nmt / OpenNMT-py: **1.07x**" in table and "pinned to CPU 0" in table
    assert "one thread each" in table
    assert all(f"- {d}" in table for d in peers.DIFFERENCES)
    two = peers.markdown({**result, "cpu": None, "threads": 2})
    assert "2 threads each" in two and "pinned" not in two
    # a side with no figure gives no ratio rather than a division by zero
    result["runs"]["onmt"] = [run(0.0)]
    assert peers.ratio(result) is None and "nmt / OpenNMT-py: -" in peers.markdown(result)


def test_validation_is_on_the_same_pairs_every_n_steps() -> None:
    cfg = load_config(DEMO)
    o = peers.peer_options(cfg, Path("/d/train.src"), Path("/d/train.tgt"), Path("/d/vocab.txt"),
                           4000, Path("/d/run"), 600,
                           valid=(Path("/d/valid.src"), Path("/d/valid.tgt")), eval_every=100)
    assert o["data"]["valid"] == {"path_src": "/d/valid.src", "path_tgt": "/d/valid.tgt"}
    assert o["valid_steps"] == 100 and o["train_steps"] == 600


def quality_run(*points: tuple[int, float, float]) -> dict[str, Any]:
    return {"steps": 300, "steady_tokens_per_sec": 5000.0, "wall_s": 100.0,
            "valid": [{"step": s, "valid_loss": v, "train_s": t} for s, v, t in points]}


def test_time_to_quality_is_to_the_loss_both_sides_reach() -> None:
    """The target is the higher of the two sides' lowest losses; each side's time is at its
    first validation at or below it; the speedup compares the fastest runs."""
    runs = {"nmt": [quality_run((100, 4.0, 30), (200, 3.0, 60), (300, 2.5, 90)),
                    quality_run((100, 4.1, 25), (200, 3.2, 50), (300, 2.9, 75))],
            "onmt": [quality_run((100, 4.2, 40), (200, 3.5, 80), (300, 2.9, 120))]}
    r = peers.reached(runs)
    assert r["target_loss"] == 2.9
    assert r["seconds_to_target"] == {"nmt": [90, 75], "onmt": [120]}
    assert r["speedup"] == pytest.approx(120 / 75)
    # a run that never gets there counts as not reached, not as zero seconds
    runs["nmt"][1] = quality_run((100, 4.1, 25), (300, 3.1, 75))
    r = peers.reached(runs)
    assert r["seconds_to_target"]["nmt"] == [90, None] and r["speedup"] == pytest.approx(120 / 90)
    # a side with no validation: no target, no speedup
    assert peers.reached({"nmt": runs["nmt"], "onmt": [quality_run()]})["speedup"] is None
    table = peers.quality_markdown(
        {"config": "demo.toml", "steps": 300, "eval_every": 100, "threads": 2, "repeats": 1,
         "precision": "bf16 (auto: avx512_bf16)", "valid_pairs": 3350, "runs": runs,
         "differences": ["x"], **peers.reached(runs)})
    assert "| 300 | 2.500 (90) | 3.100 (75) | 2.900 (120) |" in table
    assert "| 200 | 3.000 (60) | - | 3.500 (80) |" in table
    assert "nmt / OpenNMT-py, time to the target: **1.33x** faster" in table
    assert "nmt 90, not reached; OpenNMT-py 120" in table


def test_sides_alternate_which_goes_first() -> None:
    calls: list[str] = []

    def side(name: str) -> Any:
        return lambda: calls.append(name) or {"steps": len(calls)}

    lines: list[str] = []
    runs = peers.alternated(3, side("nmt"), side("onmt"), lambda row: "ok", lines.append)
    assert calls == ["nmt", "onmt", "onmt", "nmt", "nmt", "onmt"]
    assert [r["steps"] for r in runs["nmt"]] == [1, 4, 5] and len(runs["onmt"]) == 3
    assert lines[0] == "  nmt: 1 steps, ok"


def test_pieces_written_for_the_peer_count_what_they_hold(tiny_data_dir: Path,
                                                          tmp_path: Path) -> None:
    """write_pieces: one line a pair in each file, the counts in its record (what the
    time-to-quality report states), and the record reused while the cache is the same."""
    cfg = load_config(None, ["data.vocab_size=64", "data.valid_frac=0.1", "data.test_frac=0.1"])
    info = peers.write_pieces(cfg, tiny_data_dir, tmp_path / "pieces", log=lambda s: None)

    def lines(name: str) -> int:
        return len((tmp_path / "pieces" / name).read_text(encoding="utf-8").splitlines())

    assert info["pairs"] == lines("train.src") == lines("train.tgt") > 0
    assert info["valid_pairs"] == lines("valid.src") == lines("valid.tgt") > 0
    (tmp_path / "pieces" / "valid.src").write_text("")  # not rewritten: the record stands
    assert peers.write_pieces(cfg, tiny_data_dir, tmp_path / "pieces",
                              log=lambda s: None) == info
    assert lines("valid.src") == 0
