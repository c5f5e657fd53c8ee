"""speechc: ahead-of-time compiled speech models, driven from Python.

A thin ctypes layer over libspeechc.so (the C API of ``runtime/speechc.h``,
the tokenizer and the compiler)::

    import speechc
    speechc.build("Qwen3-TTS-0.6B", "tts.so")           # compile in-process
    with speechc.Model("tts.so") as m:
        pcm, rate = m.tts("Hello", speaker="ryan", language="english", seed=1)
        for chunk in m.tts_stream("Hello again", speaker="ryan"):
            ...                                          # each frame's PCM as it is decoded

See ``Model`` for the LM calls (``generate``, ``tokenize``), Moshi's
conversations (``moshi``, ``moshi_batch``) and for thread-safety.  Errors are :class:`Error` with the C message.
"""
from ._lib import library_path
from .build import build
from .errors import Error
from .audio import s16le, wav_bytes, wav_header
from .model import Model, ModelInfo, MoshiBatch, MoshiConversation, SpeechRequest, TtsStream

__all__ = ["Model", "ModelInfo", "MoshiBatch", "MoshiConversation", "SpeechRequest", "TtsStream", "Error", "build",
           "library_path", "version", "wav_bytes", "wav_header", "s16le"]
__version__ = "0.1.0"


def version() -> str:
    """The loaded library's version: ``speechc X.Y.Z (artifact ABI N)``."""
    from ._lib import lib
    return lib().sc_library_version().decode()
