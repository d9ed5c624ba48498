"""A candidate's source from a file, or why it has none: a verdict, never an exception.

`kbx eval FILE` and a replayed folder of kernels read files a user or another harness wrote. An
unreadable, binary, non-UTF-8, empty or huge file is the candidate's failure, judged like any other
(`error_kind`, `error_msg`), not a traceback. Source is decoded as Python decodes it (PEP 263: UTF-8
unless a coding line says otherwise).
"""
from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from kbx_ray.types import ErrorKind

MAX_BYTES = 1 << 20  # 1 MiB: two orders of magnitude above any completion a token limit allows


@dataclass(frozen=True)
class Source:
    code: str                # the decoded source ("" when there is none)
    error_kind: str = ""     # an ErrorKind when the file gives no source
    error_msg: str = ""

    @property
    def ok(self) -> bool:
        return not self.error_kind


def read_source(path: str | Path, max_bytes: int = MAX_BYTES) -> Source:
    """The file's source, or the verdict on it. A path that does not exist is the caller's
    concern (for `kbx eval` a usage error); everything past that is a verdict."""
    path = Path(path)
    try:
        if not path.is_file():
            return _bad(ErrorKind.NO_CODE_BLOCK, f"{path} is not a regular file (a folder, a "
                        "device or a pipe): give the candidate's .py file")
        size = path.stat().st_size
        if size > max_bytes:
            return _bad(ErrorKind.NO_CODE_BLOCK, f"{path} is {size / 2**20:.1f} MiB, over the "
                        f"{max_bytes / 2**20:g} MiB a candidate may be: not a kernel module")
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        return _bad(ErrorKind.NO_CODE_BLOCK, f"cannot read {path}: {e.strerror or e}")
    if len(data) > max_bytes:  # it grew while we looked
        return _bad(ErrorKind.NO_CODE_BLOCK, f"{path} is over the {max_bytes / 2**20:g} MiB a "
                    "candidate may be: not a kernel module")
    return decode(data, str(path))


def decode(data: bytes, where: str) -> Source:
    """Bytes -> source, as the interpreter would take them (or the verdict)."""
    if not data.strip():
        return _bad(ErrorKind.NO_CODE_BLOCK, f"{where} is empty: no code to judge")
    nul = data.find(b"\0")
    if nul >= 0:
        return _bad(ErrorKind.SYNTAX_ERROR, f"{where} holds a NUL byte at offset {nul}: a binary "
                    "file, not Python source")
    encoding = "utf-8"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        code = data.decode(encoding)
    except UnicodeDecodeError as e:
        return _undecodable(data, where, e)
    except (SyntaxError, LookupError) as e:  # invalid UTF-8 in the first two lines, a bad coding
        try:                                 # line, or an unknown codec
            data.decode("utf-8")
        except UnicodeDecodeError as u:
            return _undecodable(data, where, u)
        return _bad(ErrorKind.SYNTAX_ERROR, f"{where}: {e}")
    return Source(code.lstrip("\ufeff"))


def _undecodable(data: bytes, where: str, e: UnicodeDecodeError) -> Source:
    line = data.count(b"\n", 0, e.start) + 1
    return _bad(ErrorKind.SYNTAX_ERROR, f"{where} is not valid {e.encoding} (byte "
                f"0x{data[e.start]:02x} on line {line}): Python source must be UTF-8 or declare "
                "its coding (PEP 263)")


def _bad(kind: str, msg: str) -> Source:
    return Source("", kind, msg)
