# Helpers of the compare rules (workflow/rules/compare.smk): the configured pair of runs as
# Snakemake outputs, constraints and params.

import re

COMPARE = settings("compare")


def compare_file(name):
    """A file of the comparison of the runs named by the wildcards run_a and run_b."""
    return f"{COMPARE.results}/compare/{{run_a}}_vs_{{run_b}}/{name}"


def compare_constraint(index):
    """The rule matches the configured runs alone, and nothing when none are named."""
    return re.escape(COMPARE.runs[index]) if COMPARE.runs else "(?!)"


def compare_report(name, caption):
    return report(
        compare_file(name),
        caption=f"../report/compare/{caption}.rst",
        category=CATEGORIES["compare"],
    )


def name_two_runs(wildcards):
    """The `compare` target with no runs named: one line, exit 1, before any rule runs."""
    try:
        COMPARE.require_pair()
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        sys.exit(1)
    return []


def compare_targets():
    """The comparison's files, or (no runs named) the function that says to name two."""
    if not COMPARE.runs:
        return name_two_runs
    return expand(rules.compare_runs.output, run_a=COMPARE.a, run_b=COMPARE.b)
