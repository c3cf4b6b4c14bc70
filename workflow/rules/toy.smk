# Chapter toy (explainer sections 1-6 and 8): the hand-built NumPy Transformer reading one CDR3.
# tcrformer.chapters.toy: settings, compute.toy_values, figure_data.


rule toy_values:
    """The toy Transformer's values, arrays and figure data."""
    output:
        values=result("toy", "values.json"),
        X=result("toy", "X.npy"),
        attention_weights=result("toy", "attention_weights.npy"),
        context=result("toy", "context.npy"),
        block_output=result("toy", "block_output.npy"),
        head1_queries=result("toy", "head1_queries.npy"),
        head1_keys=result("toy", "head1_keys.npy"),
        scaling_raw_scores=result("toy", "scaling_raw_scores.npy"),
        scaling_weights_unscaled=result("toy", "scaling_weights_unscaled.npy"),
        scaling_weights_scaled=result("toy", "scaling_weights_scaled.npy"),
        figure_data=result("toy", "figure_data.json"),
    log:
        log_for("toy_values"),
    benchmark:
        benchmark_for("toy_values")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    params:
        config=params_of("toy", "numerics"),
    script:
        "../scripts/toy_values.py"


register(rules.toy_values)


rule toy:
    """Target: the toy chapter and its golden check."""
    input:
        rules.toy_values.output,
        result("toy", "golden.ok"),
