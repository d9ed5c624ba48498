"""Sandboxed evaluation, by trust boundary: `static/` (the policy over candidate source, run in the
parent), `worker/` (what runs beside the candidate in the sandbox worker), `parent/` (the trusted
judge) and `common/` (what both sides run). `protocol.py` is the wire between the two processes,
`settings.py` the config.

INTEGRITY.md explains why nothing a candidate does can change its verdict, layer by layer.
"""
