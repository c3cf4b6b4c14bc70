"""The registration's code digest (chapters/claims/digest.py): it follows exactly the code
that decides, function by function, on a throwaway package written to tmp_path and
imported, and on the real verdicts."""

from __future__ import annotations

import importlib
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from tcrformer.chapters.claims.digest import (
    DigestError,
    changed,
    closure,
    code_digest,
    combined,
    environment,
)

# A throwaway package: `decides` reaches each helper by one path only ----------------------------

PACKAGE = {
    "__init__.py": "",
    "rule.py": '''
import functools

import numpy as np

import digest_demo.chained
from digest_demo import powers
from digest_demo.shapes import Effect, Logbook, Settings

LIMIT = 0.05
DIVISOR = 3
WEIGHTS = np.array([1.0, 2.0, 3.0])
TABLE = {"low": (1, 2), "high": set("abcdefgh")}
SETTINGS = Settings(width=4, names=("a", "b"))
SQUARE = functools.partial(powers.power, exponent=2)


def _double(x):
    return 2 * x


def _halve(x):
    return x / 2


REGISTRY = {"double": _double, "halve": _halve, "mean": np.mean}  # numpy's: not followed


def helper(x):
    return x * 2 + DIVISOR


def decides(x: float, kind: str, book: Logbook | None = None) -> bool:
    """Docstring."""
    from digest_demo.other import DIVISOR, scale
    from .near import shift
    import digest_demo.aliased as aliased
    from . import sibling

    y = helper(scale(x)) + shift(x) + aliased.offset(x) + sibling.bump(x)  # a comment
    y = y + digest_demo.chained.twist(x) + REGISTRY[kind](x) + SQUARE(x)
    y = y + float(WEIGHTS.sum()) + TABLE["low"][0] + SETTINGS.width
    for unrelated in range(2):  # a local that shares a global's name
        y = y + unrelated
    y = y / DIVISOR  # the other module's
    return Effect(y).side == "up" and y < LIMIT


def unrelated(x):
    return x + 1
''',
    "other.py": "DIVISOR = 10\n\n\ndef scale(x):\n    return x / 10\n",
    "near.py": "def shift(x):\n    return x - 1\n",
    "aliased.py": "def offset(x):\n    return x + 5\n",
    "sibling.py": "def bump(x):\n    return x + 7\n",
    "chained.py": "def twist(x):\n    return -x\n",
    "powers.py": "def power(x, exponent):\n    return x**exponent\n",
    "shapes.py": """
from dataclasses import dataclass


class Base:
    def sign(self):
        return 1 if self.value >= 0 else -1


@dataclass(frozen=True)
class Effect(Base):
    value: float
    THRESHOLD = 0.0

    @property
    def side(self):
        return "up" if self.value * self.sign() > self.THRESHOLD else "down"

    def rarely(self):
        return 0


@dataclass(frozen=True)
class Settings:
    width: int
    names: tuple


class Logbook:
    def write(self, line):
        return line
""",
}

KEEPS = {  # edit: (file, old, new)
    "comment": ("rule.py", "# a comment", "# another comment, longer"),
    "docstring": ("rule.py", '"""Docstring."""', '"""Another docstring."""'),
    "layout": (
        "rule.py",
        'return Effect(y).side == "up" and',
        'return (Effect(y).side ==\n"up") and',
    ),
    "unrelated function": ("rule.py", "return x + 1", "return x + 2"),
    "annotated class": ("shapes.py", "return line", "return line * 2"),
}
CHANGES = {  # edit: (file, old, new, the one name whose hash changes)
    "operator": ("rule.py", "y < LIMIT", "y <= LIMIT", "rule.decides"),
    "helper": ("rule.py", "return x * 2", "return x * 3", "rule.helper"),
    "body import": ("other.py", "x / 10", "x / 100", "other.scale"),
    "relative import": ("near.py", "x - 1", "x - 2", "near.shift"),
    "import as": ("aliased.py", "x + 5", "x + 6", "aliased.offset"),
    "from . import": ("sibling.py", "x + 7", "x + 8", "sibling.bump"),
    "attribute chain": ("chained.py", "return -x", "return x", "chained.twist"),
    "constant": ("rule.py", "LIMIT = 0.05", "LIMIT = 0.06", "rule.LIMIT"),
    "constant of the same name": ("rule.py", "DIVISOR = 3", "DIVISOR = 4", "rule.DIVISOR"),
    "body-imported constant": ("other.py", "DIVISOR = 10", "DIVISOR = 11", "other.DIVISOR"),
    "dict constant": ("rule.py", '"low": (1, 2)', '"low": (1, 3)', "rule.TABLE"),
    "set in a constant": ("rule.py", 'set("abcdefgh")', 'set("abcdefgx")', "rule.TABLE"),
    "array values": ("rule.py", "2.0, 3.0]", "2.0, 4.0]", "rule.WEIGHTS"),
    "array dtype": ("rule.py", "3.0])", "3.0], dtype=np.float32)", "rule.WEIGHTS"),
    "dataclass constant": ("rule.py", "width=4", "width=5", "rule.SETTINGS"),
    "registry entry": ("rule.py", "x / 2", "x / 4", "rule._halve"),
    "partial argument": ("rule.py", "exponent=2", "exponent=3", "rule.SQUARE"),
    "partial function": ("powers.py", "x**exponent", "abs(x) ** exponent", "powers.power"),
    "property": ("shapes.py", "> self.THRESHOLD", ">= self.THRESHOLD", "shapes.Effect"),
    "class constant": ("shapes.py", "THRESHOLD = 0.0", "THRESHOLD = 0.5", "shapes.Effect"),
    "method": ("shapes.py", "return 0", "return 1", "shapes.Effect"),
    "base class": ("shapes.py", "self.value >= 0", "self.value > 0", "shapes.Base"),
}


def _forget():
    for loaded in [m for m in sys.modules if m.split(".")[0] == "digest_demo"]:
        del sys.modules[loaded]


def _load(root, files: dict[str, str], module: str = "rule"):
    """Write the package under root and import one of its modules afresh."""
    _forget()
    package = root / "digest_demo"
    package.mkdir(parents=True)
    for name, text in files.items():
        (package / name).write_text(text)
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(f"digest_demo.{module}")
    finally:
        sys.path.remove(str(root))


@pytest.fixture
def demo(tmp_path):
    """load(name, files): the package's digest from rule.decides, in a fresh folder."""

    def load(name: str, files: dict[str, str]) -> dict[str, str]:
        rule = _load(tmp_path / name, files)
        found = code_digest([rule.decides], package="digest_demo")
        return {name.removeprefix("digest_demo."): sha for name, sha in found.items()}

    yield load
    _forget()


def _edited(file: str, old: str, new: str) -> dict[str, str]:
    assert sum(text.count(old) for text in PACKAGE.values()) == 1, old
    return {**PACKAGE, file: PACKAGE[file].replace(old, new)}


@pytest.mark.parametrize("edit", KEEPS)
def test_digest_ignores_what_does_not_decide(demo, edit):
    before, after = demo("before", PACKAGE), demo("after", _edited(*KEEPS[edit]))
    assert combined(before) == combined(after)


@pytest.mark.parametrize("edit", CHANGES)
def test_digest_marks_exactly_the_code_that_changed(demo, edit):
    file, old, new, name = CHANGES[edit]
    before, after = demo("before", PACKAGE), demo("after", _edited(file, old, new))
    assert changed(before, after) == [name]


def test_digest_is_the_same_in_every_process(tmp_path):
    """Sets are sorted: string hashing differs between processes (PYTHONHASHSEED)."""
    _load(tmp_path, PACKAGE)
    _forget()
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import digest_demo.rule as r; "
        "from tcrformer.chapters.claims.digest import code_digest, combined; "
        "print(combined(code_digest([r.decides], package='digest_demo')))"
    )
    found = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(found) == 1


def test_digest_names_what_it_reached_and_not_the_rest(demo):
    reached = set(demo("once", PACKAGE))
    assert {"rule.REGISTRY", "rule._double", "shapes.Settings", "shapes.Base"} <= reached
    assert not {"rule.unrelated", "shapes.Logbook", "rule.Logbook"} & reached


F = "def f():\n    return 1\n\n\n"
BOX = "class Box:\n    def __init__(self):\n        self.n = 1\n\n\n"  # mutable
UNHASHABLE = {
    "a mutable instance": BOX + "X = Box()\n",
    "a mutable instance in a registry": BOX + "X = {'box': Box()}\n",
    "a lambda": "X = lambda y: y\n",
    "an array of objects": "import numpy as np\n\nX = np.array([None, 1])\n",
    "two functions of one name": F + "G = f\n\n\n" + F.replace("1", "2") + "X = (G, f)\n",
}


@pytest.mark.parametrize("case", UNHASHABLE)
def test_digest_refuses_what_it_cannot_hash(tmp_path, case):
    files = {"__init__.py": "", "bad.py": UNHASHABLE[case] + "\n\ndef reads():\n    return X\n"}
    bad = _load(tmp_path, files, "bad")
    try:
        with pytest.raises(DigestError, match="digest_demo.bad"):
            code_digest([bad.reads], package="digest_demo")
    finally:
        _forget()


def test_environment_names_the_versions_beside_the_digest():
    found = environment()
    assert found["python"] == platform.python_version()
    assert found["numpy"] == np.__version__
    assert set(found) == {"python", "numpy", "scipy", "torch"}


# The real code ---------------------------------------------------------------------------------


def test_digest_of_judge_all_covers_effects_registries_and_their_entries():
    from tcrformer.chapters.claims import exact, protocol, verdicts

    reached = closure([verdicts.judge_all])
    effect = reached[f"{protocol.__name__}.Effect"]
    assert effect.kind == "class" and "attr='Sides'" in effect.text
    sides = reached[f"{exact.__name__}.Sides"]  # the base class: which p-value decides
    assert sides.kind == "class"
    assert "name='side'" in sides.text and "name='p_value'" in sides.text
    per_seed = reached[f"{protocol.__name__}.PER_SEED"]
    assert per_seed.kind == "constant" and "'paired_binary'" in per_seed.text
    for name in ("_paired_difference", "_paired_relative", "_seed_mean", "holm", "holm_levels",
                 "decide", "interval"):  # fmt: skip
        assert reached[f"{protocol.__name__}.{name}"].kind == "function", name
    for name in ("continuous_test", "paired_binary_test", "paired_binary_counts",
                 "sign_flip_null", "paired_binary_interval"):  # fmt: skip
        assert reached[f"{exact.__name__}.{name}"].kind == "function", name
    for registry in ("PRECONDITIONS", "AT_STEPS", "EVALUATORS"):
        assert reached[f"{verdicts.__name__}.{registry}"].kind == "constant", registry
    entries = [
        *verdicts.PRECONDITIONS.values(),
        *verdicts.AT_STEPS.values(),
        *(f for by_name in verdicts.EVALUATORS.values() for f in by_name.values()),
    ]
    names = {f.__name__ for f in entries}
    assert {"_median_at_least", "_by_design", "_log2_mean_over_steps"} <= names
    assert not {"_lower", "_greedy_room", "_first_with_room"} & names  # deleted in v4
    for function in entries:  # every entry of each registry, by way of the registry
        assert reached[f"{verdicts.__name__}.{function.__name__}"].kind == "function"


def test_digest_of_the_real_beam_metric_reaches_its_decoders_and_not_its_neighbours():
    pytest.importorskip("torch")
    from tcrformer.training import measures

    reached = code_digest([measures.beam_metrics])
    names = {name.rsplit(".", 1)[-1] for name in reached}
    assert {"beam_search", "sequence_log_prob", "same_through_eos", "greedy_decode",
            "beam_outcomes"} <= names  # fmt: skip
    assert {"EOS", "BOS", "PAD"} <= names  # the constants it reads
    assert not {"calibration", "eval_excess", "curve_metrics"} & names  # same module


def test_a_skipped_module_is_not_followed_even_where_it_holds_run_time_state(tmp_path):
    # The claims skip the model's arithmetic (compute.ARITHMETIC), where core.blas holds the
    # loaded BLAS library: a run with the portable kernels failed its registration on it.
    files = {
        "__init__.py": "",
        "kernels.py": BOX + "LOADED = Box()\n\n\ndef product(a, b):\n    return LOADED.n * a * b\n",
        "rule.py": "from digest_demo.kernels import product\n\n\n"
        "def decides(a):\n    return product(a, 2) > 1\n",
    }
    rule = _load(tmp_path, files)
    try:
        with pytest.raises(DigestError, match="digest_demo.kernels.LOADED"):
            code_digest([rule.decides], package="digest_demo")
        kept = code_digest([rule.decides], package="digest_demo", skip=("digest_demo.kernels",))
        assert set(kept) == {"digest_demo.rule.decides"}
    finally:
        _forget()


def test_the_claims_digest_skips_the_models_arithmetic_and_keeps_decoding():
    from tcrformer.chapters.claims import compute
    from tcrformer.chapters.claims.metrics import EXTRAS, METRICS

    points = compute.shared_decision_code() + [m.compute for m in METRICS.values()]
    points += list(EXTRAS.values())  # init's step-0 model reaches the layers
    reached = set(closure(points, skip=compute.ARITHMETIC))
    assert not {n for n in reached if n.startswith(compute.ARITHMETIC)}
    assert "tcrformer.models.transformer.greedy_decode" in reached  # scoring stays decided
