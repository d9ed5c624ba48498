"""What both sides import (README.md lists the modules): the same inputs, tensor walk, timing loop
and confinement in the trusted parent and in the sandbox worker. Nothing here imports `parent/`,
`worker/` or `static/`; standard library, torch and numpy only (the worker's bare GPU image).
Kept empty: the worker imports it before it confines itself."""
