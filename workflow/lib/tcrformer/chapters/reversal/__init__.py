"""Chapter reversal (seed section 10.9): teach the encoder-decoder to read a CDR3 backwards.

    settings.py     the recipes (reversal: the paper's; speedrun) from the `reversal:` section
    compute.py      the rules: train_reversal, evaluate_reversal
    figure_data.py  what Fig. 13 draws
    data.py         the task: random amino-acid strings and their reversals
    model.py        build either implementation; save and load the weights
    train.py        schedule, loss, seeded and resumable training loop
    evaluate.py     held-out exact reversals, the CDR3, the cross-attention anti-diagonal
    values.py       what the chapter reports in values.json
    fingerprint.py  a short run's exact losses and weights: the numerics' fingerprint

Importing this package is cheap: settings.py needs no torch, so the Snakefile can use it.
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="reversal", category="4. Reversal training", writes_values=True)
