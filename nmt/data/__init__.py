"""The parallel data: declare and read (``corpora``, ``languages``), download and verify
(``download``), normalise, clean, split, tokenize, cache, batch.

Modules (imported directly; this package imports nothing so ``nmt data download`` stays light):
``corpora`` (open_data, the corpus forms), ``languages``, ``download`` (ensure_corpus),
``normalize``, ``split``, ``tokenizers``, ``prepare`` (prepare, Split, Prepared), ``batching``
(collate, make_batches, Batch), ``stats``.
"""
