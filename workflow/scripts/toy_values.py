"""Rule toy_values: the toy chapter's values and arrays (see tcrformer.toy)."""

from tcrformer import toy
from tcrformer.io import write_json, write_npy
from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    values, arrays = toy.compute(smk.params.cfg)
    for name, array in arrays.items():
        write_npy(smk.output[name], array)
    write_json(smk.output.values, values)


run(main, snakemake)
