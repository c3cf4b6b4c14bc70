"""Chapter ensemble: one reversal recipe trained once per seed, each seed evaluated as the
single run is, every stochastic value summarised as a distribution (target `ensemble`).

    settings.py       the `ensemble:` section: the recipe, the seeds, how they are grouped
    compute.py        the rules: train_ensemble, evaluate_ensemble, ensemble_summary
    figure_data.py    what the ensemble figure draws
    batched.py        several seeds in one process, as one vmapped computation
    distributions.py  quantiles, where a published value falls, the golden bands
"""
