"""Chapter notes (explainer sections 10.1-10.8 and page 2's 'In code'): the paper's encoder-decoder
built module by module, its positional encoding, parity with PyTorch's own modules, and
where its 57 million weights sit.

    settings.py     the `notes:` section (and the receptor and pad count Fig. 12 shows)
    compute.py      notes_values: every value of the chapter, the table, the breakdown
    figure_data.py  what Figs. 9, 12 and S2 draw
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="notes", category="3. Study notes", writes_values=True)
