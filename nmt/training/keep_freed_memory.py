"""A speed trick, fenced here: a training process keeps the memory it frees, instead of giving
it back to the system and asking again at the next step.

glibc's ``malloc`` serves every block above its mmap threshold (at most 32 MiB) with a fresh
``mmap``, and ``free`` unmaps it at once. A training step allocates several such blocks: the
demo's logits alone are 3,000 target tokens x 4,000 entries, 48 MB, and their log-probabilities
and gradient as many again. Each new mapping reaches the process as zeroed pages, one page fault
per 4 KiB: about 26,000 faults a step on the demo, every step, in which the kernel zeroes
memory the next line of the step overwrites.

:func:`keep_freed_memory` tells glibc (``mallopt``) to serve large blocks from its heap too
(``M_MMAP_MAX = 0``) and not to give the heap's free top back to the system
(``M_TRIM_THRESHOLD`` at its largest), so a step reuses the blocks the previous one freed. The
computation does not change, only where its arrays live: the losses are the same bit for bit
(``tests/test_keep_freed_memory.py``). The process keeps its high-water mark of memory
(measured: peak resident memory 1-6% higher on the demo), as a caching allocator such as
PyTorch's on a GPU does.

Measured on the demo's training steps in fp32 (docs/BENCHMARKS.md, "Training speed on the
CPU"). Left alone where it does not apply (another C library than glibc, or a system other than
Linux), and where the user has tuned glibc's ``malloc`` already (``MALLOC_MMAP_MAX_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``, or ``GLIBC_TUNABLES``).
"""

from __future__ import annotations

import ctypes
import platform
import sys

from nmt.environment import read

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
M_MMAP_MAX = -4
LARGEST = 2**31 - 1  # mallopt takes an int

USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
                 "GLIBC_TUNABLES")


def applies() -> bool:
    """Whether this process's ``malloc`` is glibc's, untuned by the user."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    return not any(read(name) for name in USER_SETTINGS)


def keep_freed_memory() -> bool:
    """Keep the memory this process frees for its next allocations (see the module's
    docstring); whether it was done."""
    if not applies():
        return False
    libc = ctypes.CDLL(None)  # the C library this process runs on
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, LARGEST))
