"""Result files: every writer goes through here, so no result is ever half-written.

Each function writes to a temporary file in the destination folder, flushes it to disk,
gives it the mode the user's umask gives a new file (0644 under the usual 022: the group
and a web server can read the results), renames it over the target (an atomic step on POSIX
file systems) and flushes the folder, so the rename itself survives a crash. A process
killed mid-write leaves either the old file or no file, never a truncated one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import numpy as np


class ResultFileError(ValueError):
    """A result or input file that cannot be read; the message names the file."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*.tmp"):  # left by a killed writer
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp_path, new_file_mode())  # mkstemp made it 0600
        os.replace(tmp_path, target)
        fsync_folder(target.parent)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def new_file_mode() -> int:
    """The mode open() gives a new file under this process's umask: 0o666 & ~umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries to disk (a rename is only durable once its folder is)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _jsonable(value: Any) -> Any:
    """Turn numpy/torch scalars and arrays into plain JSON values; reject NaN and inf."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy / torch arrays and scalars
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"refusing to write a non-finite number ({value}) to JSON")
    return value


def dumps_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, fixed indentation, trailing newline (byte-stable)."""
    return json.dumps(_jsonable(obj), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, dumps_json(obj))


def read_json(path: str | os.PathLike) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultFileError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultFileError(f"{path}: not valid JSON ({err})") from None


def write_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """Save one array in .npy format (no pickling: loadable with allow_pickle=False)."""
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    write_bytes(path, buffer.getvalue())


def read_npy(path: str | os.PathLike) -> np.ndarray:
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ResultFileError(f"{path}: file not found") from None
    except (ValueError, OSError, EOFError) as err:
        raise ResultFileError(f"{path}: not a readable .npy array ({err})") from None


def read_csv(path: str | os.PathLike, **options):
    """A pandas DataFrame from a CSV file; an unreadable file is an error naming it."""
    import pandas as pd

    try:
        return pd.read_csv(path, **options)
    except FileNotFoundError:
        raise ResultFileError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ResultFileError(f"{path}: not a readable CSV ({err})") from None


def write_csv(path: str | os.PathLike, frame) -> None:
    """Write a pandas DataFrame as CSV with a fixed float format and no index."""
    write_text(path, frame.to_csv(index=False, lineterminator="\n"))


def sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_named(outputs: Any, results: Mapping[str, Any]) -> None:
    """Write each result to the rule output of the same name, by the file's extension:
    .json (JSON-able), .npy (array), .csv (DataFrame), anything else text; a callable
    result writes the file itself (it is called with the path).

    `outputs` is a rule's named outputs (snakemake.output) or a plain mapping. A rule and
    the compute function that fill it must agree on the names: a mismatch is a bug.
    """
    names = dict(outputs.items())
    if set(names) != set(results):
        raise RuntimeError(
            f"outputs {sorted(set(names) - set(results))} have no result, "
            f"results {sorted(set(results) - set(names))} no output"
        )
    for name, path in names.items():
        content, suffix = results[name], Path(path).suffix
        if callable(content):
            content(path)
        elif suffix == ".json":
            write_json(path, content)
        elif suffix == ".npy":
            write_npy(path, content)
        elif suffix == ".csv":
            write_csv(path, content)
        else:
            write_text(path, content)
