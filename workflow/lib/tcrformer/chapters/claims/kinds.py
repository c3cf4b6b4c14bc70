"""What a claim may be and test, by name: the one list the settings check a claims file
against (importing no numpy, since the workflow checks the config before any rule runs).
protocol.py and verdicts.py hold the code of each name, and fail at import when one has
none."""

# Seed-based experiments: the primary effects (protocol.STATISTICS) and their directions.
EFFECTS = ("median_difference", "relative_difference", "rate_difference", "median")
DIRECTIONS = ("greater", "less", "equivalent")
# Every other kind of claim: the evaluators of its test (verdicts.EVALUATORS).
EVALUATED = {
    "analytic": ("draws", "first_rise"),
    "check": ("relative", "permutation", "quadratic"),
    "benchmark": ("speed",),
}
TESTS = {"experiment": EFFECTS, **EVALUATED}  # kind -> the tests it may run
KINDS = tuple(TESTS)

SUPPORTED, REFUTED, INCONCLUSIVE = "SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE"
HOLDS, FAILS = "HOLDS", "FAILS"
VERDICTS = {
    "experiment": (SUPPORTED, REFUTED, INCONCLUSIVE),
    "analytic": (SUPPORTED, REFUTED, INCONCLUSIVE),
    "check": (HOLDS, FAILS),
    "benchmark": (SUPPORTED, REFUTED, INCONCLUSIVE),
}
