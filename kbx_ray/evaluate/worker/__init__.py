"""What runs beside the untrusted candidate, in the sandbox worker process (README.md lists the
modules). Kept empty: `python -m kbx_ray.evaluate.worker.main` imports it before it confines
itself, so nothing here may import torch or start a thread."""
