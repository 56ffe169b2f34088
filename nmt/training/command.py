"""What ``nmt train`` does around the training loop: resolve the config and the run directory,
show progress on the terminal, and draw the training curves when the run ends."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt import environment
from nmt.config import load_config
from nmt.errors import CheckpointError, ConfigError, NmtError
from nmt.runs.directory import config_for_resume
from nmt.runs.layout import CONFIG_FILE, check_run_name
from nmt.runs.records import data_dir_for
from nmt.training.finetune import child_config, open_parent, run_start
from nmt.training.loop import INTERRUPTED, Display, TrainResult, train


class TerminalDisplay(Display):
    """A progress bar of the epoch's steps on a terminal, with the latest loss, learning rate
    and speed. When stderr is not a terminal (a log file, a pipe) or ``NMT_NO_PROGRESS=1``, a
    line every ``log_every`` steps instead of a bar redrawn into the log."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.bar: Any = None  # made at the first step: ranks other than 0 never show one
        self.epoch = -1
        self.off = environment.read("NMT_NO_PROGRESS") == "1"

    def step(self, epoch: int, step_in_epoch: int, steps_in_epoch: int,
             record: dict[str, Any] | None) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=0, unit="step", dynamic_ncols=True, leave=False,
                            disable=True if self.off else None)  # None: off unless a terminal
        if epoch != self.epoch:
            self.epoch = epoch
            self.bar.reset(total=steps_in_epoch)
            self.bar.update(step_in_epoch - 1)
            self.bar.set_description(f"epoch {epoch + 1}")
        self.bar.update(1)
        if record is None:
            return
        if self.bar.disable:
            self.log(f"step {record['step']} (epoch {epoch + 1}): train loss "
                     f"{record['train_loss']:.3f}, lr {record['lr']:.2e}, "
                     f"{record['tokens_per_sec']:,.0f} tokens/s")
        else:
            self.bar.set_postfix(loss=f"{record['train_loss']:.3f}", lr=f"{record['lr']:.2e}",
                                 tok_s=f"{record['tokens_per_sec']:,.0f}")

    def validation(self, line: str) -> None:
        from tqdm import tqdm

        tqdm.write(line)

    def note(self, line: str) -> None:
        self.validation(line)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def write_plots(run_dir: Path) -> None:
    """Training curves into the run directory (a run with no metrics gets none)."""
    from nmt.pictures.curves import plot_training_curves

    try:
        plot_training_curves(run_dir)
    except NmtError:
        pass


def default_run_name(config_path: Path | None) -> str:
    """The run's name when ``--run-name`` gives none: its config file's (``configs/demo.toml``:
    ``demo``), which must make a directory name (an error names ``--config`` when not)."""
    if config_path is None:
        return "run"
    try:
        return check_run_name(config_path.stem)
    except NmtError:
        raise NmtError(f"--config {config_path}: the file's name {config_path.stem!r} cannot "
                       "name the run's directory; choose one with --run-name") from None


def speed_summary(result: TrainResult) -> str:
    """This invocation's speed for the final line: target tokens/s, the FLOP/s they make and,
    on the CPU, their share of its fp32 peak (:mod:`nmt.training.cost`; threads are torch's)."""
    import torch

    from nmt.training.cost import compute_summary, this_cpu_fp32_peak

    text = f"{result.tokens_per_sec:,.0f} tokens/sec on {result.device}"
    if not result.flops_per_token:
        return text
    peak = this_cpu_fp32_peak(torch.get_num_threads()) if result.device == "cpu" else None
    return f"{text}, {compute_summary(result.tokens_per_sec, result.flops_per_token, peak)}"


def run_train_command(
    config_path: Path | None, overrides: list[str], *, run_name: str | None, runs_dir: Path,
    data_dir: Path | None, resume: bool, overwrite: bool, log: Callable[[str], None],
    parent: Path | None = None,
) -> TrainResult:
    """What ``nmt train`` does: resolve config and run directory, train with a progress bar,
    then draw the curves of a run that was not interrupted. ``parent``: continue that run's
    model on the data the config gives (:mod:`nmt.training.finetune`). ``data_dir`` None: the
    default, or for ``resume`` the one the run was trained from
    (:func:`nmt.runs.records.data_dir_for`)."""
    if parent is not None and resume:
        raise ConfigError("--from: a resumed run continues from its own checkpoint; give --from "
                          "to start a run, --resume to continue one")
    opened = open_parent(parent) if parent is not None else None
    if run_name is None and opened is not None and config_path is None:
        name = f"{opened.name or opened.run_dir.resolve().name}-continued"
    else:
        name = default_run_name(config_path) if run_name is None else check_run_name(run_name)
    run_dir = runs_dir / name
    if opened is not None and _same_directory(opened.run_dir, run_dir):
        raise NmtError(f"--from {parent}: is the run this training would write ({run_dir}); "
                       "continued into itself, it would replace the model it starts from: give "
                       "another --run-name")
    if resume:
        if not (run_dir / CONFIG_FILE).is_file():
            raise CheckpointError(f"--resume: {run_dir / CONFIG_FILE} not found; nothing to "
                                  "resume")
        cfg = config_for_resume(run_dir, overrides, config_path)
    elif opened is not None:
        cfg = child_config(opened, config_path, overrides)
    else:
        cfg = load_config(config_path, overrides)
    data_dir = data_dir_for(run_dir if resume else None, data_dir)
    result = train(cfg, run_dir, data_dir=data_dir, resume=resume, overwrite=overwrite, log=log,
                   display=TerminalDisplay(log), start=run_start(cfg, opened, run_dir, resume))
    if result.main and result.progress.stop_reason != INTERRUPTED:
        write_plots(run_dir)
    return result


def _same_directory(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


__all__ = ["TerminalDisplay", "default_run_name", "run_train_command", "speed_summary",
           "write_plots"]
