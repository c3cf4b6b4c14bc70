"""Chapter ensemble: one reversal recipe trained once per seed, each seed evaluated as the
single run is, every stochastic value summarised as a distribution (target `ensemble`).

    settings.py       the `ensemble:` section: the recipe and its seeds, one job each
    compute.py        the rules: train_ensemble, evaluate_ensemble, ensemble_summary
    figure_data.py    what the ensemble figure draws
    distributions.py  quantiles, where a published value falls, the golden bands
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="ensemble", category="6. Seed ensembles", writes_values=False)
