"""Training: what turns a recipe into a trained model and measures it, for every chapter
that trains (reversal, ensemble, claims) and the benches.

    recipe.py       Recipe: every key that shapes a trained model; its checks; the device
    data.py         the reversal task: tokens, random batches, the held-out set
    model.py        build a model from a recipe's architecture; save and load its weights
    schedule.py     the learning rate (Noam, linear) and the label-smoothing loss floor
    loop.py         the loop: seeded, logged, resumable; autograd's step where the
                    hand-written one does not cover the recipe
    step.py         the hand-written step: chunks, their gradients summed, clipping, Adam
    workers.py      the processes the chunks run on, and the memory they share
    checkpoints.py  what a killed run resumes from
    measures.py     what is measured on a trained model, each measure defined once
    evaluate.py     a trained model's test: held-out strings, the CDR3, its cross-attention
    values.py       a recipe's values: losses at the report steps and the evaluation
    fingerprint.py  the exact bits of a short run: the numerics check across machines

torch is imported by data, model, loop, checkpoints, measures and evaluate: rule scripts import them
after pinning the numerics (core.runner).
"""
