"""Chapter reversal (explainer section 10.9): teach the encoder-decoder to read a CDR3 backwards.

    settings.py     the recipes (reversal: the paper's; speedrun) from the `reversal:` section
    compute.py      the rules: train_reversal, evaluate_reversal
    figure_data.py  what Fig. 13 draws

The task, the model, the training loop, the evaluation and the values are tcrformer.training's,
shared with every chapter that trains. Importing this package is cheap: settings.py needs no
torch, so the Snakefile can use it.
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="reversal", category="4. Reversal training", writes_values=True)
