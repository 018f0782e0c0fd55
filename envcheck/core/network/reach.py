"""A TCP connect within a deadline, from this host or through one of its interfaces."""

import errno
import socket

SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)

# What a failed connect says about the path: the host answered (something listens, or
# nothing does), or nothing came back at all.
OPEN, REFUSED, SILENT, UNREACHABLE = "open", "refused", "no answer", "unreachable"


def connect(address, port, seconds, device=None, source=None):
    """(kind, message): OPEN when a TCP connection to address:port completed."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return UNREACHABLE, exc.strerror or str(exc)
    with sock:
        sock.settimeout(seconds)
        try:
            if device:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, device.encode())
                except PermissionError:
                    pass  # before Linux 5.7 it needs CAP_NET_RAW: the source address alone
            if source:
                sock.bind((source, 0))
            sock.connect((address, port))
            return OPEN, "connected"
        except ConnectionRefusedError:
            return REFUSED, "connection refused"
        except socket.timeout:
            return SILENT, "no answer within %g s" % seconds
        except OSError as exc:
            kind = SILENT if exc.errno == errno.ETIMEDOUT else UNREACHABLE
            return kind, exc.strerror or str(exc)


def source_for(address):
    """The local address the kernel would send from to reach ``address``, or None (a
    UDP connect: it picks a route and sends nothing)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            return s.getsockname()[0]
    except OSError:
        return None
