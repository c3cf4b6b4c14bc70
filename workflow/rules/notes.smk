# Chapter notes (explainer sections 10.1-10.8, page 2 'In code'): the full encoder-decoder in
# PyTorch, its positional encoding, parity with PyTorch's modules, where its weights sit.
# tcrformer.chapters.notes: settings, compute.notes_values, figure_data.


rule notes_values:
    """The study notes' values, positional table, weight breakdown and figure data."""
    output:
        values=result("notes", "values.json"),
        pe_table=result("notes", "pe_table.npy"),
        breakdown_csv=result("notes", "param_breakdown.csv"),
        breakdown_md=result("notes", "param_breakdown.md"),
        figure_data=result("notes", "figure_data.json"),
    log:
        log_for("notes_values"),
    benchmark:
        benchmark_for("notes_values")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    params:
        config=params_of("notes", "toy", "figures", "numerics"),
    script:
        "../scripts/notes_values.py"


register(rules.notes_values)


rule notes:
    """Target: the study-notes chapter and its golden check."""
    input:
        rules.notes_values.output,
        result("notes", "golden.ok"),
