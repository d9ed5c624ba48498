"""The trusted parent: the evaluator that spawns the sandbox worker, makes the inputs, runs the
reference, judges the worker's reply and times the eager reference (README.md lists the modules)."""
