"""Pin the sweep dashboard in a W&B project: `python scripts/wandb_workspace.py --entity E --project P`.

Thin on purpose: the workspace is described in kbx_ray/sinks/wandb_workspace.py. Needs network, a
W&B key (`wandb login`) and `pip install wandb-workspaces`; prints the workspace's URL.
"""
import argparse
import sys

from kbx_ray.sinks.wandb_workspace import build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entity", required=True, help="W&B user or team")
    ap.add_argument("--project", default="kbx_ray",
                    help="the project sweeps log to (sink.wandb.project)")
    args = ap.parse_args(argv)
    workspace = build(args.entity, args.project).save()
    sys.stdout.write(f"{workspace.url}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
