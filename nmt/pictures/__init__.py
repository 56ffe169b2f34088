"""Pictures: a run's training curves (:mod:`curves`), attention heatmaps (:mod:`attention`), and
the text of any script in them (:mod:`text`: fonts chosen by what they cover, right-to-left
text, literal dollar signs). matplotlib is imported only here."""
