"""The parallel data: declare and read, download and verify, normalise, clean, split, tokenize,
cache, batch.

Modules (imported directly; this package imports nothing so ``nmt data download`` stays light):
``corpora`` (the corpus forms: ``open_data``), ``languages``, ``download`` (``ensure_corpus``),
``normalize``, ``filters``, ``langid`` and ``cleaning`` (reading and cleaning), ``augment``
(case forms), ``spool`` and ``hash_buckets`` (the pairs on disk while a cache is built),
``split``, ``tokenizers``, ``prepare`` (``prepare``, ``Prepared``, the build's stages),
``cache`` (a prepared cache, written and read), ``batching`` and ``token_budget``, ``stats``.
docs/ARCHITECTURE.md has the whole map.
"""
