"""tcrclaims: the claims' logic, what the explainer says in prose tested, each claim an
experiment with a criterion written before the run (workflow/claims/config/claims.yaml) and a
verdict computed by code (target `claims`; the rules, scripts and config: workflow/claims/).
It imports the library, tcrformer, which never imports it.

    settings.py     the `claims:` section: seeds, arms (the paper's recipe, changed), claims
    compute.py      the rules: train_claim_arm (then evaluate_claim_arm), claims_analytic,
                    claims_cost, claims_rnn_speed, claims_summary
    figure_data.py  what Figs. C1-C7 draw
    figures.py      Figs. C1-C7: the rows of the figure table this package declares
    plotting.py     their draw functions
    kinds.py        what a claim may be and test, by name
    metrics.py      the per-arm metrics a claim tests or reports (METRICS), and the
                    evaluation's extras each needs
    analytic.py     the experiments that need no training
    protocol.py     paired effects over seeds, their exact tests (tcrformer.stats), Holm
    verdicts.py     each kind of criterion, evaluated
    summary.py      the table, its Markdown, and what the figures draw
"""
