"""How many distinct batch shapes an epoch of a config's training has, and how much of it is
padding, with ``train.pad_to_multiple`` off and at each multiple asked
(:mod:`nmt.data.fixed_shapes`). Counts from the prepared data's lengths, not timings: the same
on any machine, busy or not.

    python -m bench.shapes configs/demo.toml --multiples 8,16 [--epochs 3] [--set k=v]

Prints a Markdown table: multiple, batches, distinct ``(pairs, source width, target width)``
shapes, distinct target widths, padding's share of the positions.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nmt.errors import NmtError


def shape_counts(config: Path, multiples: Sequence[int], epochs: int = 1,
                 data_dir: Path | None = None,
                 overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row per multiple (0: off) over ``epochs`` epochs of ``config``'s training batches."""
    from nmt.config import load_config
    from nmt.data.batching import make_batches
    from nmt.data.download import default_data_dir
    from nmt.data.fixed_shapes import batch_shapes, distinct_shapes, padding_share
    from nmt.data.prepare import prepare

    cfg = load_config(config, list(overrides))
    t = cfg.train
    split = prepare(cfg.data, data_dir or default_data_dir(), log=lambda s: None).splits["train"]
    src, tgt = split.src_lengths(), split.tgt_lengths()
    rows = []
    for m in multiples:
        batches = [b for e in range(epochs)
                   for b in make_batches(src, tgt, batch_size=t.batch_size, by=t.batch_by,
                                         seed=t.seed, epoch=e, pad_to_multiple=m)]
        shapes = batch_shapes(src, tgt, batches, m, cfg.data.truncate)
        rows.append({"pad_to_multiple": m, "epochs": epochs, "batches": len(batches),
                     "distinct_shapes": distinct_shapes(shapes),
                     "target_widths": len({s[2] for s in shapes}),
                     "padding_share": round(padding_share(src, tgt, batches, m,
                                                          cfg.data.truncate), 4)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| train.pad_to_multiple | batches | distinct shapes | target widths | padding |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['pad_to_multiple'] or 'off'} | {r['batches']:,} | {r['distinct_shapes']:,} "
              f"| {r['target_widths']} | {100 * r['padding_share']:.1f}% |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.shapes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", type=Path)
    p.add_argument("--multiples", default="8,16", help="comma-separated; off is always shown")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--set", action="append", default=[], help="section.key=value")
    args = p.parse_args(argv)
    try:
        multiples = [0, *(int(m) for m in args.multiples.split(",") if m.strip())]
    except ValueError:
        print(f"error: --multiples {args.multiples}: expected integers, e.g. 8,16",
              file=sys.stderr)
        sys.exit(2)
    try:
        rows = shape_counts(args.config, multiples, args.epochs, args.data_dir, args.set)
    except NmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(table(rows))


if __name__ == "__main__":
    main()
