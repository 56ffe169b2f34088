"""Training: the loop (:mod:`loop`), read top to bottom, and its parts.

- :mod:`command`: what ``nmt train`` shows and writes at the end;
- :mod:`state`: what a step changes, the checkpoints and the exact resume;
- :mod:`batches`: the prepared corpus and the order of its batches;
- :mod:`step`: one optimizer step and its loss; :mod:`validation`: validation, the best
  weights and the end of a run;
- :mod:`optim`, :mod:`ema`, :mod:`cost` (FLOPs), :mod:`distributed` (several GPUs).
"""
