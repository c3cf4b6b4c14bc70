"""Figures drawn from result files: one module per chapter, one `draw_*` function per figure.

Every `draw_*` function takes loaded arrays and tables (never a model) and returns a
matplotlib Figure; `style.save` writes it as byte-stable PNG and SVG. Nothing here imports
torch or a protein language model, so a figure can be redrawn without them.
"""
