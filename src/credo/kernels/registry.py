"""Kernel registry: ``@kernel("name")`` registers a Gram-matrix function."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

Kernel = Callable[[Sequence[Hashable], Sequence[Hashable]], np.ndarray]
"""``gram(xs, ys) -> K`` with ``K[i, j] = k(xs[i], ys[j])``, shape ``(len(xs), len(ys))``."""

KERNELS: dict[str, Kernel] = {}


def kernel(name: str) -> Callable[[Kernel], Kernel]:
    """Register a Gram-matrix function under ``name``."""

    def register(fn: Kernel) -> Kernel:
        if name in KERNELS:
            raise ValueError(f"kernel {name!r} is registered twice")
        KERNELS[name] = fn
        return fn

    return register


def get_kernel(name_or_fn: str | Kernel) -> Kernel:
    """The kernel registered as ``name_or_fn``, or ``name_or_fn`` itself if callable."""
    if callable(name_or_fn):
        return name_or_fn
    try:
        return KERNELS[name_or_fn]
    except KeyError:
        raise ValueError(
            f"unknown kernel {name_or_fn!r}; known kernels: {', '.join(sorted(KERNELS))}"
        ) from None
