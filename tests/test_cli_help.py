"""Every command's --help shows its help text as written (nothing eaten as markup)."""

import re

import typer
from typer.testing import CliRunner

from nmt.cli import app


def _commands(group, path: tuple[str, ...] = ()):
    yield path, group
    if hasattr(group, "commands"):  # a group (typer vendors click: no isinstance on click's)
        for name, sub in group.commands.items():
            yield from _commands(sub, (*path, name))


def test_help_keeps_every_bracketed_word():
    """`[decode]`, `[data] corpus`: config sections named in help texts reach the terminal
    (a markup renderer once printed "the run's )" for "the run's [decode])")."""
    runner = CliRunner()
    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        wanted = {w for text in texts for w in re.findall(r"\[[A-Za-z_.]+\]", text)}
        if not wanted:
            continue
        shown = runner.invoke(app, [*path, "--help"], terminal_width=200).output
        for word in wanted:
            assert word in shown, f"nmt {' '.join(path)} --help lost {word}"
            checked += 1
    assert checked >= 3  # translate's --beam, --batch-size; data's [data]
