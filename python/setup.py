"""Bundles libspeechc.so into the wheel when one is at hand.

pyproject.toml holds the metadata; this file only decides which shared
library goes into the package, at build time:

1. ``SPEECHC_LIBRARY=/path/to/libspeechc.so pip install ./python``: that
   file;
2. otherwise ``../build/libspeechc.so`` beside this directory, what
   ``cmake --build build`` in the repository makes (pip builds a local
   directory in place, so the path is the repository's);
3. otherwise none: the wheel is pure Python, and ``SPEECHC_LIBRARY`` must
   name the library at run time.

A wheel that carries the library is tagged for this platform
(``py3-none-linux_x86_64``): the library is C, called through ctypes, so
it does not depend on the Python version.
"""
import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
LIB_NAME = "libspeechc.so"


def library_source():
    env = os.environ.get("SPEECHC_LIBRARY")
    if env:
        p = Path(env)
        if not p.is_file():
            sys.exit(f"SPEECHC_LIBRARY={env}: no such file (hint: cmake --build build makes build/{LIB_NAME})")
        return p
    p = HERE.parent / "build" / LIB_NAME
    return p if p.is_file() else None


class BuildPyWithLibrary(build_py):
    """build_py that copies the shared library into the package."""

    def run(self):
        super().run()
        src = library_source()
        dst = Path(self.build_lib) / "speechc" / LIB_NAME
        if src is None:
            print(f"speechc: no {LIB_NAME} bundled (set SPEECHC_LIBRARY at run time)", file=sys.stderr)
            if dst.exists():
                dst.unlink()
            return
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        print(f"speechc: bundled {src}", file=sys.stderr)


class PlatformWheel(bdist_wheel):
    """A wheel with the library is for this platform, any Python 3."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = library_source() is None

    def get_tag(self):
        python, abi, plat = super().get_tag()
        if not self.root_is_pure:
            python, abi = "py3", "none"
        return python, abi, plat


setup(cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
