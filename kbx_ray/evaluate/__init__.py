"""Sandboxed evaluation: the trusted parent (evaluator) and the untrusted worker (worker)."""
