"""Exact tests and intervals, apart from any chapter: the claims judge their experiments with
them, and the golden check's offline methods (tools/golden.py) give their rates' intervals.

    sides.py       a test's two one-sided p-values against a margin, for a direction
                   (greater, less, or equivalent as two one-sided tests)
    sign_flip.py   Fisher's sign-flip test of paired values against a margin (enumeration,
                   an integer lattice, or Monte Carlo), its interval, a t-test beside it
    binary.py      paired binary outcomes: the exact unconditional test, its interval and
                   McNemar's; the exact (Clopper-Pearson) interval of a rate
    holm.py        Holm's step-down over a family, and each hypothesis's level
"""
