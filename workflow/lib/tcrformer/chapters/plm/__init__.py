"""Chapter plm (explainer section 7): hide one CDR3 residue and let a protein language model
guess it.

Two models read the public GILGFVFTL receptor: ESM-2 (through fair-esm, when its weights can
be had) reads the whole TCRbeta chain; SCEPTR (weights shipped in its wheel) reads the paired
receptor's six CDR loops. Importing this package is cheap: torch, fair-esm and SCEPTR are
imported by the modules that use them.

    settings     the `plm` config section as typed values, checked with the key in each error
    compute      one function per rule: plm_esm2, plm_sceptr, plm_scan, plm_values
    figure_data  what Fig. 7 and the CDR3 scan draw
    guess        one model's guess for one hidden residue (renormalized, top-4)
    segments     which gene encodes each CDR3 position (V gene, junction, J gene)
    weights      where ESM-2's weight files live (no torch import: the Snakefile uses it)
    esm2         loading ESM-2 safely and masking the chain
    sceptr_mlm   SCEPTR's masked-residue head on the full receptor
    scan         every CDR3 position hidden in turn; germline vs junctional means
    values       the flat values.json keys of the chapter
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="plm", category="2. Protein language models", writes_values=True)
