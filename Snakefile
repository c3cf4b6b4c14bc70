# The workflow is workflow/Snakefile; this is `include:` keeping its default target `all`.
workflow.include("workflow/Snakefile", overwrite_default_target=True)
