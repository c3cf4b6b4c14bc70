"""What a claim may be and test, by name: the one list the settings check a claims file
against (importing no numpy, since the workflow checks the config before any rule runs).
protocol.py and verdicts.py hold the code of each name, and fail at import when one has
none."""

# Seed-based experiments: the primary effects (protocol.PER_SEED) and their directions.
EFFECTS = ("paired_difference", "paired_relative", "seed_mean", "paired_binary")
DIRECTIONS = ("greater", "less", "equivalent")
# Every other kind of claim: the evaluators of its test (verdicts.EVALUATORS).
EVALUATED = {
    "analytic": ("first_rise",),
    "check": ("relative", "permutation", "quadratic", "every_seed", "draws_share"),
    "benchmark": ("speed",),
}
TESTS = {"experiment": EFFECTS, **EVALUATED}  # kind -> the tests it may run
# The tests that read a benchmark job of their own, one per claim: test -> the rule.
BENCHMARKS = {"quadratic": "claims_cost", "speed": "claims_rnn_speed"}
KINDS = tuple(TESTS)
# Manipulation checks a claim may register (`precondition`): did the situation the claim
# speaks of occur here (verdicts.PRECONDITIONS)? One that fails makes it NOT TESTABLE HERE.
PRECONDITIONS = (
    "converged",
    "median_at_least",
    "by_design",
    "blowup",
    "parallelism",
)

# A run diverged when its held-out exact is under this (or a loss is not finite): one
# absolute rule for every arm and norm.
DIVERGED_BELOW = 0.05

SUPPORTED, REFUTED, INCONCLUSIVE = "SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE"
NOT_TESTABLE = "NOT TESTABLE HERE"
HOLDS, FAILS = "HOLDS", "FAILS"
VERDICTS = {
    "experiment": (SUPPORTED, REFUTED, INCONCLUSIVE, NOT_TESTABLE),
    "analytic": (SUPPORTED, REFUTED, INCONCLUSIVE),
    "check": (HOLDS, FAILS, NOT_TESTABLE),
    "benchmark": (SUPPORTED, REFUTED, INCONCLUSIVE, NOT_TESTABLE),
}
