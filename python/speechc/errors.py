"""The one exception type of the package."""
from __future__ import annotations


class Error(Exception):
    """A failure reported by libspeechc, or a bad argument caught before it.

    ``code`` is the C error code, which is also ``speechc``'s exit code:
    1 a bad argument (``SC_EUSAGE``), 2 a bad input file (``SC_EINPUT``),
    3 a failure while running (``SC_ERUNTIME``).  ``message`` is the C
    message, naming the file, argument or tensor at fault.
    """

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"speechc.Error(code={self.code}, message={self.message!r})"
