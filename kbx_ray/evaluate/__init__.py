"""Sandboxed evaluation: the trusted parent (evaluator) and the untrusted worker (worker).

INTEGRITY.md explains why nothing a candidate does can change its verdict, layer by layer.
"""
