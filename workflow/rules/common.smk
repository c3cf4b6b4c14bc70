# Shared set-up: config validation, the paths every chapter writes to, the manifest's
# registry. Nothing heavy is imported here (no torch, no numpy): start-up must stay fast.
import os
import re
import sys
from pathlib import Path

# The library beside these rules, ahead of any installed copy: the rule files parse in a bare
# clone (snakemake --lint, as the workflow catalog runs it), and the jobs' scripts import it.
_LIB_DIR = str(Path(workflow.current_basedir).resolve().parent / "lib")
sys.path.insert(0, _LIB_DIR)

from tcrformer import share_library  # noqa: E402

share_library(_LIB_DIR)

from tcrformer.chapters import records as chapter_records
from tcrformer.figures import CATEGORIES
from tcrformer.figures import FIGURES as FIGURE_TABLE
from tcrformer.figures import FOLDER as FIGURE_FOLDER
from tcrformer.figures import figure_paths
from tcrformer.core.config import ConfigError, sections
from tcrformer.core.golden_file import GoldenFileError, load_golden
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


def checked_config(check):
    """check(config), or one line naming the bad key, exit 1, as the config check does: the
    check of a unit that its own rule file runs, after this one."""
    try:
        return check(config)
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        sys.exit(1)


SETTINGS = _validate_config(config)

RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"

# Every chapter, as its package declares it: the Snakefile includes each one's rule file.
CHAPTERS = chapter_records()
# The chapters of `all`: each values.json merged into results/<run>/values.json and judged by
# the run's golden check (the other chapters are targets of their own).
VALUE_CHAPTERS = [chapter.name for chapter in CHAPTERS if chapter.writes_values]

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
    for figure in FIGURES_OF_ALL:
        sections.setdefault(figure.category, []).append(figure.id)
    return dict(sorted(sections.items()))


def chapter_figures(chapter):
    """The PNG and SVG of every figure drawn from a chapter's data (None: the schematics)."""
    return [p for f in FIGURE_TABLE if f.chapter == chapter for p in figure_files(f.id)]


# The figures of `all`: those of its chapters, and the schematics (they read no results).
FIGURES_OF_ALL = [f for f in FIGURE_TABLE if f.chapter in (*VALUE_CHAPTERS, None)]


def figure_inputs(figure):
    """{name: result file} of the chapter data the figure draws."""
    return {name: result(figure.chapter, file) for name, file in figure.files().items()}


def figure_png(figure, captions="../report/figures"):
    """The PNG of a figure, shown in the report under its chapter with its caption (in
    `captions`, relative to the rule file)."""
    return report(
        figure_files(figure.id)[0],
        caption=f"{captions}/{figure.id}.rst",
        category=figure.category,
    )


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


# The compare chapter's pair of runs as Snakemake outputs, constraints and params.
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
