# Benchmarks and the golden check's power: the rules that run bench/ (none is part of `all`).
# This is the one rule file that names bench/; the library never imports it.
#
#   snakemake --cores 2 bench            the explainer's training code against ours
#   snakemake --cores 2 bench_numerics   portable against native numerics
#   snakemake --cores 2 power            every power fault trained for each of its seeds

from tcrformer.core.power import FAULTS_FILE, read_power_plan

# The golden check's power: the faults bench/golden_power.py injects and their seeds, as
# data (config/golden/v4/faults.yaml: `none`, the control, among them), read here without
# loading the harness.
try:
    POWER = read_power_plan(OWN_CONFIG / FAULTS_FILE)
except GoldenFileError as err:
    sys.stderr.write(f"golden file error: {err}\n")
    sys.exit(1)


wildcard_constraints:
    fault="|".join(POWER.faults),


rule bench:
    """Benchmark: the explainer's training code against ours, as whole processes."""
    output:
        csv=result("bench", "bench.csv"),
        md=result("bench", "bench.md"),
    log:
        log_for("bench"),
    conda:
        "../../envs/torch.yaml"
    threads: 2
    script:
        "../../bench/bench_reversal.py"


rule bench_numerics:
    """Benchmark: portable against native numerics, on one worker and on two."""
    output:
        csv=result("bench", "numerics.csv"),
        md=result("bench", "numerics.md"),
    log:
        log_for("bench_numerics"),
    conda:
        "../../envs/torch.yaml"
    threads: 2
    script:
        "../../bench/bench_numerics.py"


# The paper recipe trained with a fault in its code, for one seed; its values.json holds
# what the golden check judges, and tools/golden/ counts how often the committed bands
# FAIL each fault.
rule golden_power:
    output:
        values=result("power", "{fault}/seed{seed}/values.json"),
        model=result("power", "{fault}/seed{seed}/model.safetensors"),
        losses=result("power", "{fault}/seed{seed}/losses.csv"),
        numerics=result("power", "{fault}/seed{seed}/numerics.json"),
        timing=result("power", "{fault}/seed{seed}/training_time.json"),
    log:
        log_for("golden_power_{fault}_seed{seed}"),
    benchmark:
        benchmark_for("golden_power_{fault}_seed{seed}")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    resources:
        gpu=0,
        mem_mb=2000,
    params:
        recipe=REVERSAL["reversal"].params(),
        numerics=NUMERICS,
    script:
        "../../bench/golden_power.py"


rule power:
    """Golden check power: every fault of config/golden/v4/faults.yaml, each of its seeds."""
    input:
        expand(rules.golden_power.output.values, fault=POWER.faults, seed=POWER.seeds),
