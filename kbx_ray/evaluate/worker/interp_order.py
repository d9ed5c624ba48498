"""The order in which the Triton interpreter runs a launch's programs: a secret shuffle.
More: kbx_ray/evaluate/worker/README.md, `interp_order.py`.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np

FULL_SHUFFLE = 1 << 22  # grids up to this many programs get a uniform permutation; larger, an affine one


def install(it: Any) -> None:
    """Wrap `InterpreterBuilder.set_grid_dim`/`set_grid_idx` of the interpreter module `it`."""
    B = it.InterpreterBuilder
    set_dim, set_idx = B.set_grid_dim, B.set_grid_idx
    rng = np.random.default_rng(int.from_bytes(os.urandom(32), "little"))
    order: list = [None]  # this launch's bijection of the flat program index (None: one program)

    def set_grid_dim(self: Any, nx: int, ny: int, nz: int) -> None:
        set_dim(self, nx, ny, nz)
        order[0] = program_order(rng, int(nx) * int(ny) * int(nz))

    def set_grid_idx(self: Any, x: int, y: int, z: int) -> None:
        perm = order[0]
        if perm is not None:
            _, ny, nz = (int(d) for d in self.grid_dim)
            x, rest = divmod(perm((int(x) * ny + int(y)) * nz + int(z)), ny * nz)
            y, z = divmod(rest, nz)
        set_idx(self, x, y, z)

    B.set_grid_dim, B.set_grid_idx = set_grid_dim, set_grid_idx


def program_order(rng: np.random.Generator, n: int) -> Callable[[int], int] | None:
    """A random bijection of range(n) (None for n <= 1): a uniform permutation up to `FULL_SHUFFLE`
    programs; above it k -> (a k + b) mod n, a and b secret, a coprime to n (a grid that large
    would take hours in the interpreter: the bound keeps the permutation's memory small)."""
    if n <= 1:
        return None
    if n <= FULL_SHUFFLE:
        return rng.permutation(n).tolist().__getitem__
    a = int(rng.integers(1, n))
    while math.gcd(a, n) != 1:
        a = int(rng.integers(1, n))
    b = int(rng.integers(0, n))
    return lambda k: (a * k + b) % n
