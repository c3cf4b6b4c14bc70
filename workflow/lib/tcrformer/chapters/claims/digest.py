"""The registration's code digest at the level of the functions that decide (claims v4,
docs/claims_v4_design.md, section 5).

From each entry point the digest follows what the function references, through its globals,
the names it imports inside its body and the attributes of modules it names, staying inside
`package`: functions (recursively) and module-level constants. Methods called on objects
(model.decode) are not followed: the model's code is the arm's, fixed by its recipe and the
numerics fingerprint. A function is hashed as the AST of its source with docstrings
removed, so comments, blank lines and formatting do not count; a constant by its repr.
Registries of functions (a dict of functions) are named, never followed: a claim's digest
names the entries it uses, so one claim's metric changing marks only that claim.

    code_digest([f, g]) -> {"module.qualname": sha256, "module.CONSTANT": sha256, ...}
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import textwrap
import types
from collections.abc import Callable, Iterable

CONSTANTS = (int, float, str, bool, bytes, type(None))


def _is_constant(value) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(_is_constant(v) for v in value)
    return isinstance(value, CONSTANTS)


def _inside(obj, package: str) -> bool:
    module = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
    return module == package or module.startswith(package + ".")


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def function_tree(function: Callable) -> ast.AST:
    """The function's AST, docstrings removed (comments never reach an AST)."""
    source = textwrap.dedent(inspect.getsource(function))
    return _without_docstrings(ast.parse(source))


def _local_imports(tree: ast.AST, package: str) -> dict[str, object]:
    """Names bound by imports inside the function (`from package.x import y`), resolved."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == package or node.module.startswith(package + "."):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if hasattr(module, alias.name):
                        found[alias.asname or alias.name] = getattr(module, alias.name)
                    else:  # a submodule
                        submodule = node.module + "." + alias.name
                        found[alias.asname or alias.name] = importlib.import_module(submodule)
    return found


def _referenced(tree: ast.AST, function: Callable, package: str):
    """(name, object) pairs the function's body reads: globals, names it imports itself,
    and module.attribute."""
    scope = {**getattr(function, "__globals__", {}), **_local_imports(tree, package)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in scope:
            yield node.id, scope[node.id]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = scope.get(node.value.id)
            if isinstance(module, types.ModuleType) and _inside(module, package):
                if hasattr(module, node.attr):
                    yield f"{module.__name__}.{node.attr}", getattr(module, node.attr)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def code_digest(entry_points: Iterable[Callable], package: str = "tcrformer") -> dict[str, str]:
    """{qualified name: sha256} of the entry points, the package's functions they reach,
    and the module constants those read."""
    digest: dict[str, str] = {}
    queue = list(entry_points)
    while queue:
        function = inspect.unwrap(queue.pop())
        name = f"{function.__module__}.{function.__qualname__}"
        if name in digest:
            continue
        tree = function_tree(function)
        digest[name] = _sha(ast.dump(tree, include_attributes=False))
        for label, value in _referenced(tree, function, package):
            if inspect.isfunction(value) and _inside(value, package):
                queue.append(value)
            elif _is_constant(value) and not isinstance(value, type):
                qualified = label if "." in label else f"{function.__module__}.{label}"
                digest[qualified] = _sha(repr(value))
    return dict(sorted(digest.items()))


def combined(digest: dict[str, str]) -> str:
    """One sha256 over a code digest (what a claim's row compares)."""
    return _sha("\n".join(f"{k} {v}" for k, v in sorted(digest.items())))
