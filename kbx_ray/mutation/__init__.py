"""Mutation testing of the suite: realistic one-bug mutants of each task's solution."""
from kbx_ray.mutation.mutants import Mutant, mutants_for
from kbx_ray.mutation.operators import OPERATORS

__all__ = ["OPERATORS", "Mutant", "mutants_for"]
