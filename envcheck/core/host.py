"""Facts about this host that both sides read, and must read the same way.

``envcheck check`` (no torch) compares the node's glibc with a wheel's requirement; the
ranks report the glibc they run on. ``ENVCHECK_HOST`` renames a host for both.
"""

import os
import platform
import socket


def glibc_version():
    """'2.36', or None where the C library is not glibc (musl, macOS)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").split()[-1]
    except (ValueError, OSError, AttributeError, IndexError):
        lib, version = platform.libc_ver()
        return version if lib == "glibc" else None


def host_name():
    """This rank's host name. ENVCHECK_HOST overrides it: containers on different nodes
    that all call themselves the same, or two launcher agents playing two nodes on one
    machine in tests; the launch probe tells ranks apart by (host, local rank)."""
    return os.environ.get("ENVCHECK_HOST") or socket.gethostname()
