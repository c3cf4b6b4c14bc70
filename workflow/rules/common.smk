# Shared set-up: config validation, the paths every chapter writes to, the manifest's
# registry. Nothing heavy is imported here (no torch, no numpy): start-up must stay fast.
import os
import sys
from pathlib import Path

# The library beside these rules, ahead of any installed copy: the rule files parse in a bare
# clone (snakemake --lint, as the workflow catalog runs it), and the jobs' scripts import it.
_LIB_DIR = str(Path(workflow.current_basedir).resolve().parent / "lib")
sys.path.insert(0, _LIB_DIR)

from tcrformer import share_library  # noqa: E402

share_library(_LIB_DIR)

from tcrformer.figures import CATEGORIES
from tcrformer.figures import FIGURES as FIGURE_TABLE
from tcrformer.figures import FOLDER as FIGURE_FOLDER
from tcrformer.figures import figure_paths
from tcrformer.core.config import ConfigError, sections
from tcrformer.core.golden import GoldenFileError, load_golden
from tcrformer.core.manifest import code_digest
from tcrformer.validation import validate as validate_config

SCHEMA = workflow.source_path("../schemas/config.schema.yaml")


def _validate_config(config):
    """Validate before any rule runs; a bad value is one line naming the key, exit 1, and so
    is a golden or bands file that is missing, malformed or of another method version.
    Returns every chapter's typed settings."""
    try:
        found = validate_config(config, SCHEMA)
        load_golden(config["golden"]["file"])
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        sys.exit(1)
    except GoldenFileError as err:
        sys.stderr.write(f"golden file error: {err}\n")
        sys.exit(1)
    return found


SETTINGS = _validate_config(config)

RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"

# The chapters whose values.json is merged into results/<run>/values.json and judged by the
# run's golden check (the other chapter packages are targets of their own).
VALUE_CHAPTERS = ["toy", "notes", "plm", "reversal"]

# Threads of each torch job, whatever --cores says (Snakemake lowers a count above --cores
# to --cores): one in portable mode, numerics.threads in native mode. The reversal
# chapter's training runs numerics.threads workers of one thread each (the bits do not
# depend on how many); ensemble and claims jobs train on one worker, side by side.
NUMERICS = config["numerics"]
TORCH_THREADS = 1 if NUMERICS["mode"] == "portable" else NUMERICS["threads"]
TRAINING_WORKERS = NUMERICS["threads"]


def settings(chapter):
    """A chapter's typed settings, made and checked once by _validate_config."""
    return SETTINGS[chapter]


# What shapes a trained model, and a language model's guesses: the code a rule's cache key
# (cache: True) holds beside its params, so that Snakemake's between-run cache keys on it too.
TRAINING_CODE = code_digest("training", "models", "core/numerics.py")
PLM_CODE = code_digest("chapters/plm", "core/numerics.py")


def params_of(*names):
    """The config sections a rule's script reads, as its params: a change reruns the rule."""
    return sections(config, *names)


def result(chapter, name):
    """Path of one result file of a chapter: results/<run>/<chapter>/<name>."""
    return f"{RESULTS}/{chapter}/{name}"


FIGURES = f"{RESULTS}/{FIGURE_FOLDER}"


def figure_files(figure_id):
    """The PNG and SVG of a figure of the table (tcrformer.figures, figures.smk)."""
    return figure_paths(RESULTS, figure_id)


def report_sections():
    """{report section: the ids of its figures}, for the report's front page."""
    sections = {}
    for figure in FIGURE_TABLE:
        if figure.chapter in (*VALUE_CHAPTERS, None):
            sections.setdefault(figure.category, []).append(figure.id)
    return dict(sorted(sections.items()))


def chapter_figures(chapter):
    """The PNG and SVG of every figure drawn from a chapter's data (None: the schematics)."""
    return [p for f in FIGURE_TABLE if f.chapter == chapter for p in figure_files(f.id)]


def log_for(rule_name):
    return f"{LOGS}/{rule_name}.log"


def benchmark_for(rule_name):
    return f"{BENCHMARKS}/{rule_name}.tsv"


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
        if chapter in (None, ch) and ch in VALUE_CHAPTERS
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
