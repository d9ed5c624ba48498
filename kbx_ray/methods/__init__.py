"""Generation methods: each drives generate() and evaluate() (see base.py)."""
