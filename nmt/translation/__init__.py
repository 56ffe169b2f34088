"""Translation: text in, text out, with any engine.

- :mod:`translator`: raw sentences -> translations (normalisation, cut sources, streaming);
  the PyTorch engine's :class:`~nmt.translation.translator.Translator`;
- :mod:`search`: greedy and beam search over the encoder-decoder contract (PyTorch);
- :mod:`rules`: which sentences are decoded together and the length penalty, in plain Python,
  so that every engine batches and ranks alike;
- :mod:`limits`: how long a source may be and an output may grow;
- :mod:`input_case`: a sentence typed in capitals, read in sentence case;
- :mod:`structure`: each output keeps its source's protected spans, whatever the engine.

Nothing here imports torch at import time: the CTranslate2 engine uses it without.
"""
