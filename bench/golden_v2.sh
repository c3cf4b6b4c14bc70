#!/usr/bin/env bash
# Golden check v2, end to end (config/golden/README.md, "Golden check v2"): the fitting
# ensemble, three held-out ensembles (portable, two ranks, native), the power faults, then
# the bands, their validation and their power, written to config/golden/v2/. Every step is
# a Snakemake target or a command that reads only finished results, so a run that is
# stopped resumes where it was: run this again. About 4.5 hours on 2 cores.
#
#   bench/golden_v2.sh [snakemake options, e.g. --cores 16 or --profile profiles/slurm]
set -euo pipefail
cd "$(dirname "$0")/.."
snakemake=${SNAKEMAKE:-.venv/bin/snakemake}
python=${PYTHON:-.venv/bin/python}
options=("$@")
[ ${#options[@]} -eq 0 ] && options=(--cores 2)

for name in fit portable ranks2 native; do
    echo "--- ensemble $name ($(date -u +%FT%TZ))"
    "$snakemake" "${options[@]}" ensemble \
        --configfile config/config.yaml "config/golden/ensembles/$name.yaml"
done
echo "--- power faults ($(date -u +%FT%TZ))"
"$snakemake" "${options[@]}" power

"$python" -m tcrformer.chapters.ensemble.golden_v2 fit --ensemble results/golden_fit/ensemble
"$python" -m tcrformer.chapters.ensemble.golden_v2 validate \
    --ensemble portable=results/golden_portable/ensemble \
    --ensemble ranks2=results/golden_ranks2/ensemble \
    --ensemble native=results/golden_native/ensemble
# Numerics whose ensemble does not pool with the fitting one (validation.yaml's stratify)
# get bands of their own.
strata=$("$python" -c "import yaml; found = yaml.safe_load(open('config/golden/v2/validation.yaml'))
print(' '.join(f'--ensemble {n}=results/golden_{n}/ensemble' for n in found['stratify']))")
[ -n "$strata" ] && "$python" -m tcrformer.chapters.ensemble.golden_v2 stratify $strata
"$python" -m tcrformer.chapters.ensemble.golden_v2 power --runs results/paper/power
echo "--- done ($(date -u +%FT%TZ)): config/golden/v2/"
