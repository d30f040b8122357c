"""The engine asks glibc to keep freed NumPy temporaries for reuse (autograd/host_malloc.py):
checked in fresh processes through glibc's own accounting (mallinfo2: bytes in blocks that
have their own mmap), so that nothing else in the test process is affected."""
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc"
    or tuple(int(v) for v in platform.libc_ver()[1].split(".")[:2]) < (2, 33),
    reason="mallopt and mallinfo2 are glibc's (2.33+)")

# Prints: tuned?, then the bytes glibc holds in mmapped blocks while a 4 MiB array lives.
PROBE = """
import ctypes
import numpy as np
import gradtrace.autograd as ag
from gradtrace.autograd import host_malloc

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
before = libc.mallinfo2().hblkhd
a = np.ones(1 << 20, np.float32)
print(host_malloc.tuned(), libc.mallinfo2().hblkhd - before)
"""


def _probe(env_value):
    env = {"GRADTRACE_HOST_MALLOC": env_value} if env_value else {}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True).stdout.split()
    return out[0] == "True", int(out[1])


def test_a_4_mib_temporary_comes_from_the_heap_once_the_engine_is_imported():
    tuned, mmapped = _probe(None)
    assert tuned
    assert mmapped == 0


def test_system_leaves_the_c_library_settings_alone():
    tuned, mmapped = _probe("system")
    assert not tuned
    assert mmapped >= 4 << 20   # glibc's default: a block this size gets its own mmap
