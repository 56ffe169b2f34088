"""The fra-eng corpus: download and verify, normalise, clean, split, tokenize, cache, batch.

Modules (imported directly; this package imports nothing so ``nmt data download`` stays light):
``download`` (ensure_corpus), ``normalize``, ``split``, ``tokenizers``, ``prepare`` (prepare,
Split, Prepared), ``batching`` (collate, make_batches, Batch), ``stats``.
"""
