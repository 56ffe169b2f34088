"""Run directories: what training leaves under ``runs/NAME`` and how it is read back.

- :mod:`layout`: the name of everything a run directory holds (only this package spells them);
- :mod:`records`: the data, parent, scores and hardware records, written and read typed, each
  value checked by :mod:`schema`;
- :mod:`directory`: a run directory's layout, its lock, what ``--overwrite`` may remove, its
  config and its metrics log;
- :mod:`paths`: which run and which checkpoint a command means (no torch);
- :mod:`checkpoint`: the checkpoint format (safe loading, layout checks, random state);
- :mod:`loading`: a trained run loaded to translate or export;
- :mod:`table`: the ``nmt runs`` table.
"""
