"""Rule fig12_masks_data: decoder input, target and masks of Fig. 12 for the CDR3, as JSON."""

from tcrformer.io import write_json
from tcrformer.plotting.teacher_forcing import masks_for
from tcrformer.runner import run


def main(smk):
    write_json(smk.output[0], masks_for(smk.params.sequence, smk.params.pad_tokens))


run(main, snakemake)
