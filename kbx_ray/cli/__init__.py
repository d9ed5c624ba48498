"""`kbx`: the parser and subcommands (commands), `kbx eval` (eval_files), the --help pages
(help_pages) and the process's own ends (process). `python -m kbx_ray.cli` runs it.
"""
