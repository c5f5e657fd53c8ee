"""speechc.build: the compiler, in this process."""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Optional, Sequence, Union

from . import _lib
from .errors import Error

PathLike = Union[str, "os.PathLike[str]"]

# libtcc, embedded in the compiler, keeps global state: one build at a time.
_build_lock = threading.Lock()


def build(model_dir: PathLike, out: PathLike, *, weights: Optional[str] = None, cc: Optional[str] = None,
          target: Optional[str] = None, cuda_arch: Optional[str] = None, max_context: Optional[int] = None,
          prefill_chunk: Optional[int] = None, max_batch: Optional[int] = None, codec: bool = True,
          codec_weights: Optional[str] = None, fuse: bool = True, check_numerics: bool = False,
          emit_dir: Optional[PathLike] = None, quiet: bool = True, extra_args: Sequence[str] = ()) -> Path:
    """Compile the checkpoint in ``model_dir`` into ``out`` (a ``.so``), as
    ``speechc build MODEL_DIR -o OUT`` does, in this process.

    Writes ``out``, its weight file ``OUT.<id>.weights`` beside it, the
    checkpoint's tokenizer as ``OUT.tokenizer/`` and, for a Qwen3-TTS
    checkpoint with ``speech_tokenizer/`` (or a Moshi checkpoint with its
    Mimi), the codec as ``OUT.codec.so`` unless ``codec`` is False.

    Args:
        model_dir: the checkpoint directory (``config.json`` + safetensors).
        out: the shared object to write.
        weights: ``f32`` (default), ``bf16``, ``q8_0`` or ``q4_0``.
        cc: ``tcc`` (default: the embedded compiler), ``gcc`` or ``clang``
            (``-O3 -march=native``: the artifact then needs this CPU).
        target: ``cpu`` (default), ``cuda`` or ``metal``.
        cuda_arch: for ``cuda``: ``sm_80``, ``sm_90``, ``compute_80``, ...
        max_context, prefill_chunk, max_batch: as ``--max-context``,
            ``--prefill-chunk``, ``--max-batch``.
        codec: False is ``--no-codec``.
        codec_weights: the codec's band, ``f32`` or ``bf16``.
        fuse: False is ``--no-fuse`` (same numbers, slower).
        check_numerics: ``--check-numerics``.
        emit_dir: keep the generated source there.
        quiet: no progress lines on stderr (default True).
        extra_args: further ``speechc build`` options, as on the command line.

    Returns:
        ``out`` as a Path.

    Raises:
        Error: a bad option (code 1), a bad checkpoint (2, naming the file
            and tensor), or a failure of the toolchain (3).

    Builds are serialized within the process (the embedded libtcc is not
    reentrant); run several processes to build in parallel.
    """
    args = [os.fspath(model_dir), "-o", os.fspath(out)]
    for flag, value in (("--weights", weights), ("--cc", cc), ("--target", target), ("--cuda-arch", cuda_arch),
                        ("--max-context", max_context), ("--prefill-chunk", prefill_chunk),
                        ("--max-batch", max_batch), ("--codec-weights", codec_weights),
                        ("--emit-dir", None if emit_dir is None else os.fspath(emit_dir))):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise Error(_lib.SC_EUSAGE, f"{flag}: expected a string or an integer, got {value!r}")
            args += [flag, str(value)]
    if not codec:
        args.append("--no-codec")
    if not fuse:
        args.append("--no-fuse")
    if check_numerics:
        args.append("--check-numerics")
    if quiet:
        args.append("-q")
    args += [str(a) for a in extra_args]
    L = _lib.lib()
    argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
    err = _lib.sc_error()
    with _build_lock:
        rc = L.sc_build_argv(len(args), argv, ctypes.byref(err))
    _lib.check(rc, err)
    return Path(out)
