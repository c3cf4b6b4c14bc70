# Shared set-up: config validation, the paths every chapter writes to.
# Nothing heavy is imported here (no torch, no numpy): start-up must stay fast.
import os
import sys

from snakemake.utils import validate

from tcrformer.config import (
    ConfigError,
    check_semantics,
    coerce_cli_strings,
    first_schema_error,
    load_schema,
)

SCHEMA = workflow.source_path("../schemas/config.schema.yaml")


def _validate_config(config):
    """Validate before any rule runs; a bad value is one line naming the key, exit 1."""
    try:
        schema = load_schema(SCHEMA)
        coerce_cli_strings(config, schema)
        error = first_schema_error(config, schema)
        if error is not None:
            raise error
        validate(config, SCHEMA, set_default=True)
        check_semantics(config)
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        sys.exit(1)


_validate_config(config)

RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"


# Threads of every rule that runs torch. Portable numerics fix the count in config (the
# bits depend on it); native numerics take two, which Snakemake lowers to --cores.
NUMERICS = config["numerics"]
TORCH_THREADS = NUMERICS["threads"] if NUMERICS["mode"] == "portable" else 2


def result(chapter, name):
    """Path of one result file of a chapter: results/<run>/<chapter>/<name>."""
    return f"{RESULTS}/{chapter}/{name}"


def log_for(rule_name):
    return f"{LOGS}/{rule_name}.log"


def benchmark_for(rule_name):
    return f"{BENCHMARKS}/{rule_name}.tsv"


# Chapters that contribute a values.json to the merged results/<run>/values.json.
CHAPTERS = ["toy", "notes", "plm", "reversal"]


# Every result file and the rule that wrote it, for the provenance manifest.
# Each chapter calls register(rules.<name>) after defining a rule.
PRODUCED_BY = {}


def register(rule_proxy, **wildcards):
    for path in rule_proxy.output:
        PRODUCED_BY[str(path).format(**wildcards)] = rule_proxy.rule.name


# Values shown in the golden report but kept out of values.json, because they change from
# run to run (wall-clock times): golden key -> (chapter, result file, field).
REPORT_ONLY = {
    "reversal.training_time_s": ("reversal", "training_time.json", "train_seconds"),
}


def report_only_sources(chapter=None):
    return {
        key: (result(ch, name), field)
        for key, (ch, name, field) in REPORT_ONLY.items()
        if chapter in (None, ch) and ch in CHAPTERS
    }


def report_only_files(chapter=None):
    return [path for path, _ in report_only_sources(chapter).values()]


def training_numerics(chapters):
    """The numerics record of the training whose values a golden check reads."""
    return [result("reversal", "numerics.json")] if "reversal" in chapters else []


def numerics_records():
    """{rule: its numerics.json} of every rule that records the numerics it trained under."""
    records = {}
    for produced, rule_name in PRODUCED_BY.items():
        if os.path.basename(produced) == "numerics.json":
            records[rule_name] = produced
    return records
