"""Model families behind one encoder-decoder contract.

- :mod:`base`: the contract every network keeps (``encode``, ``init_state``, ``decode`` with an
  explicit incremental state), which search, training, export and pictures are written against;
- each family's own ``[model]`` settings and checks (registered by ``model.arch`` in
  :func:`nmt.config.families`, beside ``ModelConfig``) sit beside its network
  (:mod:`transformer_settings` with :mod:`transformer`, :mod:`gru_settings` with :mod:`gru`, sharing
  :mod:`attention`);
- :mod:`build`: a model built from a config (:func:`~nmt.models.build.build_model`).

Nothing here imports torch at import time but the networks and :mod:`build`: a config is
checked, and the CTranslate2 engine runs, without it.
"""
