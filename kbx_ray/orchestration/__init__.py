"""The Ray driver: cells (grid) -> methods -> evaluator groups and replicas -> the writer
(engine), with the actor groups, retries and the cluster's scaling they run on.
"""
