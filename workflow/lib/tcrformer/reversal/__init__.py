"""Chapter reversal (seed section 10.9): teach the encoder-decoder to read a CDR3 backwards.

    data.py      the task: random amino-acid strings and their reversals
    recipe.py    the recipe (paper or speedrun) read from the `reversal:` config section
    model.py     build either implementation; save and load the weights
    train.py     schedule, loss, seeded and resumable training loop
    evaluate.py  held-out exact reversals, the CDR3, the cross-attention anti-diagonal
    values.py    what the chapter reports in values.json

Importing this package is cheap: recipe.py needs no torch, so the Snakefile can use it.
"""
