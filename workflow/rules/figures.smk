# Figures: every data figure of the seed, drawn from result files (never from a model), as
# byte-stable PNG and SVG under results/<run>/figures/, each marked for the Snakemake report.
# Named figNN_<what> after the seed's figure numbers; figS* have no number in the seed.
#
#   snakemake --cores 2 figures
#   snakemake --report results/paper/report.html


include: "figures_common.smk"


rule fig01_toy_input:
    input:
        values=result("toy", "values.json"),
        X=result("toy", "X.npy"),
    output:
        png=figure_png("fig01_toy_input", TOY_CATEGORY),
        svg=figure_svg("fig01_toy_input"),
    log:
        log_for("fig01_toy_input"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_toy_input.py"


register(rules.fig01_toy_input)


rule fig02_head_plane:
    input:
        values=result("toy", "values.json"),
        head1_queries=result("toy", "head1_queries.npy"),
        head1_keys=result("toy", "head1_keys.npy"),
    output:
        png=figure_png("fig02_head_plane", TOY_CATEGORY),
        svg=figure_svg("fig02_head_plane"),
    log:
        log_for("fig02_head_plane"),
    conda:
        "../../envs/plotting.yaml"
    params:
        dim_names=head1_dimension_names(),
    script:
        "../scripts/fig_head_plane.py"


register(rules.fig02_head_plane)


rule fig03_attention_row:
    input:
        values=result("toy", "values.json"),
        weights=result("toy", "attention_weights.npy"),
    output:
        png=figure_png("fig03_attention_row", TOY_CATEGORY),
        svg=figure_svg("fig03_attention_row"),
    log:
        log_for("fig03_attention_row"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_attention_row.py"


register(rules.fig03_attention_row)


rule figS1_sqrt_dk_scaling:
    input:
        values=result("toy", "values.json"),
        raw=result("toy", "scaling_raw_scores.npy"),
        unscaled=result("toy", "scaling_weights_unscaled.npy"),
        scaled=result("toy", "scaling_weights_scaled.npy"),
    output:
        png=figure_png("figS1_sqrt_dk_scaling", TOY_CATEGORY),
        svg=figure_svg("figS1_sqrt_dk_scaling"),
    log:
        log_for("figS1_sqrt_dk_scaling"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_scaling.py"


register(rules.figS1_sqrt_dk_scaling)


rule fig04_heads:
    input:
        values=result("toy", "values.json"),
        weights=result("toy", "attention_weights.npy"),
    output:
        png=figure_png("fig04_heads", TOY_CATEGORY),
        svg=figure_svg("fig04_heads"),
    log:
        log_for("fig04_heads"),
    conda:
        "../../envs/plotting.yaml"
    params:
        head_names=[head["name"] for head in config["toy"]["heads"]],
    script:
        "../scripts/fig_heads.py"


register(rules.fig04_heads)


rule fig07_masked_guesses:
    input:
        esm2=result("plm", "esm2.json"),
        sceptr=result("plm", "sceptr.json"),
        scan=result("plm", "scan.csv"),
    output:
        png=figure_png("fig07_masked_guesses", PLM_CATEGORY),
        svg=figure_svg("fig07_masked_guesses"),
    log:
        log_for("fig07_masked_guesses"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_masked_guesses.py"


register(rules.fig07_masked_guesses)


rule fig07_cdr3_scan:
    input:
        esm2=result("plm", "esm2.json"),
        sceptr=result("plm", "sceptr.json"),
        scan=result("plm", "scan.csv"),
        summary=result("plm", "scan_summary.json"),
    output:
        png=figure_png("fig07_cdr3_scan", PLM_CATEGORY),
        svg=figure_svg("fig07_cdr3_scan"),
    log:
        log_for("fig07_cdr3_scan"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_cdr3_scan.py"


register(rules.fig07_cdr3_scan)


rule fig09_positional_encoding:
    input:
        pe_table=result("notes", "pe_table.npy"),
    output:
        png=figure_png("fig09_positional_encoding", NOTES_CATEGORY),
        svg=figure_svg("fig09_positional_encoding"),
    log:
        log_for("fig09_positional_encoding"),
    conda:
        "../../envs/plotting.yaml"
    params:
        wave_dims=config["figures"]["wave_dims"],
    script:
        "../scripts/fig_positional_encoding.py"


register(rules.fig09_positional_encoding)


rule figS2_param_breakdown:
    input:
        breakdown=result("notes", "param_breakdown.csv"),
    output:
        png=figure_png("figS2_param_breakdown", NOTES_CATEGORY),
        svg=figure_svg("figS2_param_breakdown"),
    log:
        log_for("figS2_param_breakdown"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_param_breakdown.py"


register(rules.figS2_param_breakdown)


rule fig12_masks_data:
    """Decoder input, target and masks of the configured CDR3 (no chapter writes them)."""
    output:
        f"{FIGURES}/data/masks.json",
    log:
        log_for("fig12_masks_data"),
    conda:
        "../../envs/plotting.yaml"
    params:
        sequence=config["toy"]["sequence"],
        pad_tokens=config["figures"]["pad_tokens"],
    script:
        "../scripts/fig_masks_data.py"


register(rules.fig12_masks_data)


rule fig12_teacher_forcing:
    input:
        masks=rules.fig12_masks_data.output[0],
    output:
        png=figure_png("fig12_teacher_forcing", NOTES_CATEGORY),
        svg=figure_svg("fig12_teacher_forcing"),
    log:
        log_for("fig12_teacher_forcing"),
    conda:
        "../../envs/plotting.yaml"
    script:
        "../scripts/fig_teacher_forcing.py"


register(rules.fig12_teacher_forcing)


rule fig13_training:
    input:
        losses=result("reversal", "losses.csv"),
        values=result("reversal", "values.json"),
        attention=result("reversal", "cross_attention.npy"),
        decoded=result("reversal", "cdr3_decoded.txt"),
    output:
        png=figure_png("fig13_training", REVERSAL_CATEGORY),
        svg=figure_svg("fig13_training"),
    log:
        log_for("fig13_training"),
    conda:
        "../../envs/plotting.yaml"
    params:
        prefix="reversal",
        layer=lambda wildcards: config["reversal"]["cross_attention_layer"],
    script:
        "../scripts/fig_training.py"


if "reversal" in CHAPTERS:
    register(rules.fig13_training)


rule fig05_pre_ln_block:
    output:
        png=figure_png("fig05_pre_ln_block", SCHEMATIC_CATEGORY),
        svg=figure_svg("fig05_pre_ln_block"),
    log:
        log_for("fig05_pre_ln_block"),
    conda:
        "../../envs/plotting.yaml"
    params:
        draw="draw_pre_ln_block",
        sizes={},
    script:
        "../scripts/fig_schematic.py"


register(rules.fig05_pre_ln_block)


rule fig06_encoder_decoder:
    output:
        png=figure_png("fig06_encoder_decoder", SCHEMATIC_CATEGORY),
        svg=figure_svg("fig06_encoder_decoder"),
    log:
        log_for("fig06_encoder_decoder"),
    conda:
        "../../envs/plotting.yaml"
    params:
        draw="draw_encoder_decoder",
        sizes={
            "cdr3": config["toy"]["sequence"],
            "peptide": config["figures"]["peptide"],
            "focus": config["toy"]["focus_position"],
        },
    script:
        "../scripts/fig_schematic.py"


register(rules.fig06_encoder_decoder)


rule fig08_transformer:
    output:
        png=figure_png("fig08_transformer", SCHEMATIC_CATEGORY),
        svg=figure_svg("fig08_transformer"),
    log:
        log_for("fig08_transformer"),
    conda:
        "../../envs/plotting.yaml"
    params:
        draw="draw_transformer",
        sizes={
            "n_layers": config["notes"]["num_layers"],
            "d_model": config["notes"]["d_model"],
        },
    script:
        "../scripts/fig_schematic.py"


register(rules.fig08_transformer)


rule fig10_multihead_split:
    output:
        png=figure_png("fig10_multihead_split", SCHEMATIC_CATEGORY),
        svg=figure_svg("fig10_multihead_split"),
    log:
        log_for("fig10_multihead_split"),
    conda:
        "../../envs/plotting.yaml"
    params:
        draw="draw_multihead_split",
        sizes={
            "d_model": config["notes"]["d_model"],
            "n_heads": config["notes"]["num_heads"],
        },
    script:
        "../scripts/fig_schematic.py"


register(rules.fig10_multihead_split)


rule fig11_post_pre_ln:
    output:
        png=figure_png("fig11_post_pre_ln", SCHEMATIC_CATEGORY),
        svg=figure_svg("fig11_post_pre_ln"),
    log:
        log_for("fig11_post_pre_ln"),
    conda:
        "../../envs/plotting.yaml"
    params:
        draw="draw_post_pre_ln",
        sizes={},
    script:
        "../scripts/fig_schematic.py"


register(rules.fig11_post_pre_ln)


rule golden_table:
    """The run's golden report as a table that reads in the report (the JSON is raw text)."""
    input:
        f"{RESULTS}/golden_report.json",
    output:
        report(
            f"{FIGURES}/golden_table.html",
            caption="../report/figures/golden_table.rst",
            category=GOLDEN_CATEGORY,
        ),
    log:
        log_for("golden_table"),
    conda:
        "../../envs/plotting.yaml"
    params:
        title=f"Golden check of run {RUN}: seed values against regenerated values",
    script:
        "../scripts/fig_golden_table.py"


register(rules.golden_table)


rule manifest_table:
    """The manifest as a table. Not registered: the manifest lists every registered file."""
    input:
        f"{RESULTS}/manifest.json",
    output:
        report(
            f"{RESULTS}/manifest.html",
            caption="../report/figures/manifest_table.rst",
            category=GOLDEN_CATEGORY,
        ),
    log:
        log_for("manifest_table"),
    conda:
        "../../envs/plotting.yaml"
    params:
        title=f"Provenance manifest of run {RUN}",
    script:
        "../scripts/fig_manifest_table.py"


TOY_FIGURES = [
    rules.fig01_toy_input,
    rules.fig02_head_plane,
    rules.fig03_attention_row,
    rules.figS1_sqrt_dk_scaling,
    rules.fig04_heads,
]
PLM_FIGURES = [rules.fig07_masked_guesses, rules.fig07_cdr3_scan]
# Fig. 13 needs the reversal chapter (a training of a few minutes); none without it.
REVERSAL_FIGURES = [rules.fig13_training] if "reversal" in CHAPTERS else []
SCHEMATIC_FIGURES = [
    rules.fig05_pre_ln_block,
    rules.fig06_encoder_decoder,
    rules.fig08_transformer,
    rules.fig10_multihead_split,
    rules.fig11_post_pre_ln,
]
NOTES_FIGURES = [
    rules.fig09_positional_encoding,
    rules.figS2_param_breakdown,
    rules.fig12_teacher_forcing,
]


rule figures_toy:
    """Target: the toy chapter's figures (fast: no language model, no training)."""
    input:
        outputs(TOY_FIGURES),


rule figures_notes:
    """Target: the study-notes chapter's figures (fast)."""
    input:
        outputs(NOTES_FIGURES),


rule figures_plm:
    """Target: the language-model figures (runs the plm chapter first)."""
    input:
        outputs(PLM_FIGURES),


rule figures_reversal:
    """Target: the training figure (trains the reversal model first, a few minutes)."""
    input:
        outputs(REVERSAL_FIGURES),


rule figures_schematic:
    """Target: the schematic figures (fast: they read no results)."""
    input:
        outputs(SCHEMATIC_FIGURES),


rule figures:
    """Target: every figure, and the golden table for the report."""
    input:
        outputs(
            TOY_FIGURES
            + PLM_FIGURES
            + NOTES_FIGURES
            + REVERSAL_FIGURES
            + SCHEMATIC_FIGURES
        ),
        rules.golden_table.output,
