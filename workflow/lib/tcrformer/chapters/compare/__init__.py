"""Chapter compare (target `compare`, not part of `all`): two finished runs side by side.

It reads the two runs' result files and manifests and reruns nothing:

settings.py     the `compare:` key: the two runs, each checked to be there and complete
compute.py      compare_runs: the value table (each key against the golden file's
                tolerance), the config diff from the manifests, the summary, two figures
figure_data.py  what it reads from one run's folder
"""

from tcrformer.chapters.record import Chapter

CHAPTER = Chapter(name="compare", category="8. Compare", writes_values=False)
