"""Run a sweep: `python scripts/sweep.py [sweep=<name>] [key=value ...] [--dry-run]` (`--help`: the
overrides, presets and most used keys).

Thin on purpose: everything lives in kbx_ray (see cli/commands.py and orchestration/engine.py).
"""
import sys

from kbx_ray.cli.commands import main

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]], command_line=True))
