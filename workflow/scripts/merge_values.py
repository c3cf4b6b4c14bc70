"""Rule merge_values: the chapters' values.json merged into one flat results/<run>/values.json."""

from tcrformer.core.io import read_json, write_json
from tcrformer.core.runner import UserError, run


def main(smk):
    merged = {}
    for path in smk.input:
        for key, value in read_json(path).items():
            if key in merged:
                raise UserError(f"{path}: key {key!r} is also produced by another chapter")
            merged[key] = value
    write_json(smk.output[0], merged)


run(main, snakemake)
