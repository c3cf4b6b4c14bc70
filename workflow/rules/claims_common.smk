# Helpers of the claims chapter (kept apart from its rules, as snakemake --lint asks).

CLAIMS = settings("claims")
CLAIM_ARMS = CLAIMS.used_arms()
EXTRAS = ("beam", "importance", "init")  # what a claim adds to an arm's evaluation


def claim_recipe(wc):
    """What trains an arm's seed: a change retrains it."""
    return CLAIMS.recipe(wc.arm, int(wc.seed)).training_params()


def claim_extras(wc):
    return [kind for kind in EXTRAS if wc.arm in CLAIMS.arms_needing(kind)]


def claim_metrics():
    return expand(
        result("claims", "arms/{arm}/seed{seed}/metrics.json"),
        arm=CLAIM_ARMS,
        seed=CLAIMS.seeds,
    )


def claim_histories():
    return expand(
        result("claims", "arms/{arm}/seed{seed}/history.csv"),
        arm=CLAIM_ARMS,
        seed=CLAIMS.seeds,
    )


def claim_test(kind):
    """The test of the first claim of this kind, or {} (its numbers feed a rule's params)."""
    return next((c.test for c in CLAIMS.claims if c.test["kind"] == kind), {})
