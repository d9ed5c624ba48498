"""kbx_ray: a Ray sweep engine that measures how well LLMs write Triton kernels.

Kept import-light on purpose: the sandbox worker imports `kbx_ray.evaluate.*` on bare GPU images.
"""
__version__ = "0.1.0"
