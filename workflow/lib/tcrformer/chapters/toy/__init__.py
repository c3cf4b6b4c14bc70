"""Chapter toy (explainer sections 1-6 and 8): a hand-built NumPy Transformer reads one CDR3.

settings.py     the `toy:` section: the receptor, the positions, four hand-set heads
compute.py      toy_values: the input, one head step by step, four heads, one block
                checked against PyTorch, the sqrt(d_k) demonstration
figure_data.py  what Figs. 1-4 and S1 draw
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="toy", category="1. Toy Transformer", writes_values=True)
