"""The processes a training step's chunks run on, and the memory they share.

A step splits its batch into a fixed number of chunks (the recipe's `chunks`); worker w
computes the chunks c with c % workers == w, each into its own gradient buffer, and the
first worker (this process) sums them in chunk order. So the bits do not depend on how many
workers there are, nor on which worker computed a chunk.

How the workers start, all of it:
- the shared buffers (the weights, one gradient buffer per chunk, the batch and the chunks'
  losses) are anonymous shared memory (mmap), made before the workers exist;
- workers 1..W-1 are forked from this process once the model is built: they inherit torch,
  the numerics pinned in it (the portable kernels, one thread), the model and the buffers,
  so nothing is imported, loaded or sent at start-up (a few milliseconds each);
- each step, this process writes the batch, sends every worker the step number, computes
  its own chunks and waits for a one-byte answer from each worker. A worker that fails
  sends its traceback instead, and this process raises it. A worker exits when its pipe
  closes, so none outlives the training.

Before forking, the process tells glibc's allocator to keep the memory a step frees
(`keep_freed_memory`): a step allocates and frees the same few-hundred-kilobyte activations
every time, and returned to the system they come back as fresh pages, about a thousand page
faults a step. Where mallopt is missing (not glibc) nothing changes but the speed.

Fork, not spawn: a spawned worker would import torch again (seconds) and must be told the
numerics; forking a process that runs one torch thread and OpenBLAS on one thread (no
thread pools) is safe. Linux (and any system with fork) only; where fork is missing the
step runs every chunk in this process, with the same bits.
"""

from __future__ import annotations

import ctypes
import mmap
import multiprocessing
import traceback
from collections.abc import Callable

import torch
from torch import Tensor

_DONE = b"."


def shared(shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """A zeroed tensor in anonymous shared memory: forked workers see the same bytes."""
    count = 1
    for size in shape:
        count *= size
    nbytes = max(count * torch.empty(0, dtype=dtype).element_size(), 1)
    return torch.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype, count=count).view(shape)


# glibc's mallopt parameters; a step's largest activation is about 1 MiB
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_UP_TO = 32 << 20


def keep_freed_memory() -> bool:
    """Serve allocations up to 32 MiB from the heap and never trim it: freed activations are
    reused by the next step instead of being unmapped and faulted in again. True if set."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    heap = mallopt(M_MMAP_THRESHOLD, HEAP_UP_TO)
    kept = mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    return bool(heap and kept)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class Workers:
    """Workers 1..W-1, each running `compute(chunk, step)` for its chunks when told a step.

    workers = Workers(count, chunks, compute)   # forks; compute's buffers must be shared
    workers.run(step)                           # every chunk computed, in any process
    workers.close()
    """

    def __init__(self, count: int, chunks: int, compute: Callable[[int, int], None]):
        self.count = count if can_fork() else 1
        self.chunks, self.compute = chunks, compute
        self.pipes, self.processes = [], []
        context = multiprocessing.get_context("fork") if self.count > 1 else None
        for worker in range(1, self.count):
            mine, theirs = context.Pipe()
            process = context.Process(target=self._serve, args=(worker, theirs, mine),
                                      daemon=True, name=f"tcrformer-worker-{worker}")  # fmt: skip
            process.start()
            theirs.close()
            self.pipes.append(mine)
            self.processes.append(process)

    def mine(self, worker: int) -> range:
        """The chunks worker `worker` computes."""
        return range(worker, self.chunks, self.count)

    def _serve(self, worker: int, pipe, leaders_end) -> None:
        leaders_end.close()
        torch.set_num_threads(1)
        while True:
            try:
                step = pipe.recv()
            except EOFError:
                return
            if step is None:
                return
            try:
                for chunk in self.mine(worker):
                    self.compute(chunk, step)
            except BaseException:
                pipe.send_bytes(traceback.format_exc().encode())
                return
            pipe.send_bytes(_DONE)

    def run(self, step: int) -> None:
        """Compute every chunk of `step`: the workers theirs, this process its own."""
        for pipe in self.pipes:
            pipe.send(step)
        for chunk in self.mine(0):
            self.compute(chunk, step)
        for worker, pipe in enumerate(self.pipes, start=1):
            try:
                answer = pipe.recv_bytes()
            except EOFError:
                raise RuntimeError(f"training worker {worker} exited during step {step}") from None
            if answer != _DONE:
                raise RuntimeError(f"training worker {worker} failed:\n{answer.decode()}")

    def close(self) -> None:
        for pipe in self.pipes:
            try:
                pipe.send(None)
            except (BrokenPipeError, OSError):
                pass
            pipe.close()
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        self.pipes, self.processes = [], []
