"""`python -m kbx_ray.cli ARGS`: the same as `kbx ARGS`."""
import sys

from kbx_ray.cli.commands import main

sys.exit(main())
