"""The registration's code digest at the level of the functions that decide (claims v4,
docs/claims_v4_design.md, section 5).

    closure([f, g])       {qualified name: Item(kind, text)}: what the entry points reach
    code_digest([f, g])   {qualified name: sha256 of its text}
    changed(old, new)     the names whose hash differs: what an edit marks CHANGED
    combined(digest)      one sha256 over a digest
    environment()         the Python, numpy, scipy and torch versions, stored beside it

From each entry point (a function, or a class) the digest follows what the code names
inside `package`:

- functions, hashed as the AST of their source without docstrings (comments, blank lines
  and formatting never reach an AST), with the values of their closure cells;
- classes, hashed whole (every method and property, class-level constants, dataclass fields)
  and followed through their bases, decorators and every method's references;
- the names it reads from its module's globals (Python's scoping, by symtable: a name the
  function assigns is its own), the names it imports in its body (`import pkg.mod as x`,
  `from . import mod`, `from .mod import f`), and attribute chains through package modules
  (`pkg.mod.func`);
- constants, by a canonical repr: numbers, strings, bytes, None, tuples, lists, dicts (in
  their order), sets (sorted), frozen dataclass instances of such data (and their class),
  stateless instances (their class), `functools.partial` and `np.vectorize` (what they
  wrap, and the bound arguments), compiled patterns, paths (relative to the package's
  folder), numpy arrays by dtype, shape and the sha256 of their bytes;
- registries: a constant that holds functions or classes (`PER_SEED`, `PRECONDITIONS`,
  `EVALUATORS`) names each one, and every one is followed. A registry is read through a key
  that comes from data (the claims file), so the code cannot tell which entries a claim
  reaches, and a list of entries kept by hand is how v4's prototype missed
  `_paired_difference`. The price: an edit to any entry marks every claim that reaches the
  registry (every claim reaches verdicts.judge_all).

Not followed:
- code outside `package` (numpy, scipy, torch, and their callable objects such as
  `scipy.stats.norm`): environment() records their versions;
- methods called on objects (`model.decode`: the model's code belongs to the arm, fixed by
  its recipe and the numerics fingerprint). Annotations name no code to follow either: a
  class whose methods decide on objects passed in (`verdicts.Measurements.values`) must be
  an entry point itself;
- modules the caller names in `skip` (the claims skip the model's arithmetic: its kernels
  and layers, fixed like the model's methods by the recipe and the numerics fingerprint,
  and holding run-time state such as the loaded BLAS library);
- dynamic look-ups (`getattr(module, name)`, importlib with a computed name), module-level
  statements outside functions and classes, and loggers (they decide nothing).

A package object it cannot hash (a mutable instance, a lambda, a class made at run time, an
array of objects) raises DigestError rather than being skipped. The AST's form changes
between Python versions, so two digests compare only under the same Python version.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import pathlib
import platform
import re
import symtable
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Iterator

import numpy as np

PLAIN = (type(None), bool, int, float, complex, str, bytes)
WRAPPERS = (functools.partial, np.vectorize)  # hashed by what they wrap
CONTAINERS = {tuple: "()", list: "[]", set: "{}", frozenset: "frozenset{}", dict: "{}"}


class DigestError(TypeError):
    """A package object the digest cannot hash."""


@dataclasses.dataclass(frozen=True)
class Item:
    kind: str  # "function", "class" or "constant"
    text: str  # what is hashed


def environment() -> dict[str, str | None]:
    """The versions the digest and the decisions depend on (None: not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("numpy", "scipy", "torch"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _qualified(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


# Source: the AST without docstrings, and the names it reads ------------------------------------


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def source_tree(code) -> ast.Module:
    """The function's or class's AST, docstrings removed (comments never reach an AST)."""
    try:
        source = inspect.getsource(code)
    except (OSError, TypeError) as error:  # made at run time (a ctypes array type)
        raise DigestError(f"{_qualified(code)}: no source to hash ({error})") from error
    return _without_docstrings(ast.parse(textwrap.dedent(source)))


def _tables(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    yield table
    for child in table.get_children():
        yield from _tables(child)


def without_annotations(tree: ast.Module) -> ast.Module:
    """A copy without annotations: a type names what an argument is, not code that runs."""
    tree = copy.deepcopy(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
        elif isinstance(node, ast.AnnAssign):  # a dataclass field: its default still counts
            node.annotation = ast.Constant("")
    return tree


def global_names(tree: ast.Module) -> set[str]:
    """The names the code reads from its module's globals, in any of its scopes."""
    top = symtable.symtable(ast.unparse(tree), "<digest>", "exec")
    return {
        symbol.get_name()
        for table in _tables(top)
        for symbol in table.get_symbols()
        if symbol.is_global() and symbol.is_referenced()
    }


def _body_imports(tree: ast.Module, module: str, package: str) -> dict[str, tuple[str, object]]:
    """{name: (where it comes from, what)} for the code's imports from `package` in its body."""
    bound: dict[str, tuple[str, object]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _inside(alias.name, package):
                    imported = importlib.import_module(alias.name)
                    top = alias.name.split(".")[0]
                    found = imported if alias.asname else sys.modules[top]
                    bound[alias.asname or top] = (found.__name__, found)
        elif isinstance(node, ast.ImportFrom):
            relative = "." * node.level + (node.module or "")
            base = importlib.util.resolve_name(relative, sys.modules[module].__package__)
            if _inside(base, package):
                source = importlib.import_module(base)
                for alias in node.names:
                    name, label = alias.asname or alias.name, f"{base}.{alias.name}"
                    if hasattr(source, alias.name):
                        bound[name] = (label, getattr(source, alias.name))
                    elif alias.name != "*":  # a submodule not yet imported
                        bound[name] = (label, importlib.import_module(label))
    return bound


def _chain(node: ast.Attribute) -> list[str] | None:
    """`a.b.c` as ['a', 'b', 'c']; None when it does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _through_modules(obj, attributes: list[str], package: str) -> tuple[str, object] | None:
    """Follow `attributes` from `obj` while it is a package module: (label, what it ends at)."""
    label = None
    for attribute in attributes:
        inside = isinstance(obj, types.ModuleType) and _inside(obj.__name__, package)
        if not inside or not hasattr(obj, attribute):
            break
        label, obj = f"{obj.__name__}.{attribute}", getattr(obj, attribute)
    return (label, obj) if label else None


def references(code, package: str) -> Iterator[tuple[str, object]]:
    """(label, object) for every global, body import and package-module attribute chain
    that a function's or class's source names."""
    tree = without_annotations(source_tree(code))
    module = code.__module__
    imported = _body_imports(tree, module, package)
    scope = {**vars(sys.modules[module]), **{k: v for k, (_, v) in imported.items()}}
    names = global_names(tree) | set(imported)
    for name in sorted(names & scope.keys()):
        yield imported.get(name, (f"{module}.{name}",))[0], scope[name]
    for node in ast.walk(tree):
        chain = _chain(node) if isinstance(node, ast.Attribute) else None
        if chain and chain[0] in names and chain[0] in scope:
            found = _through_modules(scope[chain[0]], chain[1:], package)
            if found:
                yield found


# The walk ----------------------------------------------------------------------------------------


def _is_code(obj) -> bool:
    return inspect.isfunction(obj) or inspect.isclass(obj)


def _outside(obj, package: str) -> bool:
    """Code from outside the package, fixed by environment(): modules, classes, functions and
    callable objects (np.add, scipy.stats.norm); typing objects and loggers decide nothing."""
    if isinstance(obj, WRAPPERS):
        return False
    if isinstance(obj, types.ModuleType):
        home = obj.__name__
    elif inspect.isclass(obj) or inspect.isroutine(obj):
        home = getattr(obj, "__module__", None) or "builtins"
    elif callable(obj) or isinstance(obj, types.GenericAlias | types.UnionType | logging.Logger):
        home = type(obj).__module__
    else:
        return type(obj).__module__ in ("typing", "typing_extensions")
    return not _inside(home, package)


def _array(value: np.ndarray | np.generic, label: str) -> str:
    if value.dtype.hasobject:
        raise DigestError(f"{label}: cannot hash a numpy array of Python objects")
    data = np.ascontiguousarray(value).tobytes()
    return f"ndarray({value.dtype.str}, {np.shape(value)}, {hashlib.sha256(data).hexdigest()})"


class _Walk:
    """The closure of some entry points: package code queued, hashed once each."""

    def __init__(self, package: str, skip: tuple[str, ...] = ()):
        self.package = package
        self.skip = skip
        self.items: dict[str, Item] = {}
        self.queue: list = []
        self.named: dict[str, object] = {}  # label -> the one function or class it names

    def run(self) -> dict[str, Item]:
        while self.queue:
            code = self.queue.pop()
            if _qualified(code) not in self.items:
                self.items[_qualified(code)] = self.hash_code(code)
        return dict(sorted(self.items.items()))

    def code(self, obj) -> str:
        """Queue a package function or class; its label."""
        obj = inspect.unwrap(obj)
        if not (_is_code(obj) and _inside(obj.__module__, self.package)):
            raise DigestError(f"{obj!r}: not a function or class of {self.package}")
        if obj.__name__ == "<lambda>":
            raise DigestError(f"{_qualified(obj)}: a lambda has no source of its own; use def")
        if self.named.setdefault(_qualified(obj), obj) is not obj:
            raise DigestError(f"{_qualified(obj)}: two functions or classes of that name")
        self.queue.append(obj)
        return _qualified(obj)

    def hash_code(self, code) -> Item:
        """Its AST and closure cells; what it names is queued or hashed on the way."""
        text = ast.dump(source_tree(code), include_attributes=False)
        if inspect.isfunction(code) and code.__closure__:
            for name, cell in zip(code.__code__.co_freevars, code.__closure__, strict=True):
                text += f"\n{name} = {self.canonical(cell.cell_contents, _qualified(code))}"
        for label, value in references(code, self.package):
            self.value(label, value)
        return Item("class" if inspect.isclass(code) else "function", text)

    def value(self, label: str, value) -> None:
        """Something the code names: code is queued, data hashed, outside code skipped."""
        value = inspect.unwrap(value) if callable(value) else value
        if _outside(value, self.package) or isinstance(value, types.ModuleType):
            return  # outside: see environment(); a package module: through its attributes
        home = value.__module__ if _is_code(value) else label.rpartition(".")[0]
        if any(_inside(home, module) for module in self.skip):
            return  # skipped by the caller
        if _is_code(value):
            self.code(value)
        elif label not in self.items:
            self.items[label] = Item("constant", self.canonical(value, label))

    def canonical(self, value, label: str) -> str:
        """A repr that names the same data the same way in every process."""
        if isinstance(value, PLAIN) and type(value).__module__ == "builtins":
            return repr(value)
        if type(value) in CONTAINERS:
            return self.container(value, label)
        if isinstance(value, np.ndarray | np.generic):
            return _array(value, label)
        if isinstance(value, functools.partial):
            return "partial" + self.canonical((value.func, value.args, value.keywords), label)
        if isinstance(value, np.vectorize):
            return "vectorize" + self.canonical((value.pyfunc, value.otypes), label)
        if isinstance(value, re.Pattern):
            return f"re.compile({value.pattern!r}, {value.flags})"
        if isinstance(value, pathlib.PurePath):
            return f"Path({self.relative(value)!r})"
        if _outside(value, self.package):
            name = getattr(value, "__qualname__", None) or repr(value)
            return f"<outside {getattr(value, '__module__', '')}.{name}>"
        if callable(value) and _is_code(inspect.unwrap(value)):
            return f"<{self.code(value)}>"
        return self.instance(value, label)

    def relative(self, path: pathlib.PurePath) -> str:
        """An absolute path relative to the package's folder: the same in every checkout."""
        if not path.is_absolute():
            return str(path)
        return os.path.relpath(path, pathlib.Path(sys.modules[self.package].__file__).parent)

    def container(self, value, label: str) -> str:
        if isinstance(value, dict):
            items = value.items()
            parts = [f"{self.canonical(k, label)}: {self.canonical(v, label)}" for k, v in items]
        else:
            parts = [self.canonical(v, label) for v in value]
            parts = sorted(parts) if isinstance(value, set | frozenset) else parts
        brackets = CONTAINERS[type(value)]
        return f"{brackets[:-1]}{', '.join(parts)}{brackets[-1]}"

    def instance(self, value, label: str) -> str:
        """A frozen dataclass of data by its fields, a stateless object by its class alone."""
        kind = type(value)
        if dataclasses.is_dataclass(value) and kind.__dataclass_params__.frozen:
            state = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        elif getattr(value, "__dict__", None) == {} and not hasattr(kind, "__slots__"):
            state = {}
        else:
            raise DigestError(
                f"{label}: cannot hash a {kind.__module__}.{kind.__qualname__} (the digest "
                "hashes plain data, frozen dataclasses of it, partials and numpy arrays)"
            )
        name = self.code(kind) if _inside(kind.__module__, self.package) else _qualified(kind)
        return name + self.canonical(state, label)


def closure(
    entry_points: Iterable[Callable], package: str = "tcrformer", skip: tuple[str, ...] = ()
) -> dict[str, Item]:
    """{qualified name: Item} of the entry points and everything of `package` they reach."""
    walk = _Walk(package, skip)
    for entry in entry_points:
        walk.code(entry)
    return walk.run()


def code_digest(
    entry_points: Iterable[Callable], package: str = "tcrformer", skip: tuple[str, ...] = ()
) -> dict[str, str]:
    """{qualified name: sha256} of the entry points' closure (see closure())."""
    return {name: _sha(item.text) for name, item in closure(entry_points, package, skip).items()}


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The names whose hash differs between two digests, or that only one of them has."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def combined(digest: dict[str, str]) -> str:
    """One sha256 over a code digest (what a claim's row compares)."""
    return _sha("\n".join(f"{k} {v}" for k, v in sorted(digest.items())))
