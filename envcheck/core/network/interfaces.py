"""This host's network interfaces, and the one gloo or NCCL will use.

Read with the stdlib only: names from ``if_nameindex``, flags and IPv4 addresses by
ioctl, IPv6 addresses from /proc/net/if_inet6.

Which interface a backend uses (the rules are the backends', not envcheck's):

- **gloo**: ``GLOO_SOCKET_IFNAME`` (a comma-separated list: one device per name, each
  must exist); without it, the address this host's own name resolves to, if a socket can
  bind it, else the loopback address (``ProcessGroupGloo::createDefaultDevice``,
  torch/csrc/distributed/c10d/ProcessGroupGloo.cpp; pytorch.org/docs/stable/
  distributed.html, "Choosing the network interface to use").
- **NCCL**: ``NCCL_SOCKET_IFNAME``, a list of name prefixes, ``^`` to exclude, ``=`` for
  an exact name; without it, ``ib*`` interfaces first, then any other but ``lo`` and
  ``docker*``, which are used only when nothing else is up (docs.nvidia.com/deeplearning/
  nccl/user-guide/docs/env.html, NCCL_SOCKET_IFNAME).
"""

import array
import fcntl
import socket
import struct

SIOCGIFFLAGS = 0x8913
SIOCGIFCONF = 0x8912
IFF_UP = 0x1
IFF_LOOPBACK = 0x8


class Interface:
    def __init__(self, name, up, loopback, addresses):
        self.name, self.up, self.loopback, self.addresses = name, up, loopback, addresses

    def __repr__(self):
        return "Interface(%r, up=%s, loopback=%s, %s)" % (
            self.name, self.up, self.loopback, self.addresses)


def _flags(sock, name):
    try:
        raw = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("256s", name.encode()[:15]))
        return struct.unpack("H", raw[16:18])[0]
    except OSError:
        return 0


def _ipv4(sock):
    """{name: [IPv4 addresses]} from SIOCGIFCONF (labels such as eth0:1 fold into eth0)."""
    size = 40  # struct ifreq on 64-bit Linux
    buf = array.array("B", b"\0" * size * 128)
    addr, _ = buf.buffer_info()
    try:
        out = fcntl.ioctl(sock, SIOCGIFCONF, struct.pack("iL", len(buf), addr))
    except OSError:
        return {}
    length = struct.unpack("iL", out)[0]
    data = buf.tobytes()[:length]
    found: dict = {}
    for i in range(0, length, size):
        name = data[i:i + 16].split(b"\0", 1)[0].decode(errors="replace").split(":")[0]
        found.setdefault(name, []).append(socket.inet_ntoa(data[i + 20:i + 24]))
    return found


def _ipv6():
    found: dict = {}
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    raw = bytes.fromhex(parts[0])
                    if raw[:2] == b"\xfe\x80":
                        continue  # link-local: no backend uses it across hosts
                    found.setdefault(parts[5], []).append(socket.inet_ntop(socket.AF_INET6, raw))
    except (OSError, ValueError):
        pass
    return found


def interfaces():
    """{name: Interface}, in the kernel's order."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        v4 = _ipv4(sock)
        v6 = _ipv6()
        out = {}
        for _, name in socket.if_nameindex():
            flags = _flags(sock, name)
            out[name] = Interface(name, bool(flags & IFF_UP), bool(flags & IFF_LOOPBACK),
                                  v4.get(name, []) + v6.get(name, []))
    return out


def owner(address, ifaces):
    """The interface holding ``address``, or None."""
    return next((i for i in ifaces.values() if address in i.addresses), None)


def nccl_matches(spec, ifaces):
    """The interfaces NCCL_SOCKET_IFNAME=spec selects (NCCL's prefix rules)."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    prefixes = [p for p in spec.split(",") if p]

    def hit(name):
        return any(name == p if exact else name.startswith(p) for p in prefixes)

    return [i for i in ifaces.values() if i.addresses and (hit(i.name) != exclude)]


def nccl_default(ifaces):
    """NCCL's own pick without NCCL_SOCKET_IFNAME: ib*, else not lo/docker*, else those."""
    usable = [i for i in ifaces.values() if i.up and i.addresses]
    for rule in (lambda i: i.name.startswith("ib"),
                 lambda i: not i.loopback and not i.name.startswith(("lo", "docker")),
                 lambda i: True):
        chosen = [i for i in usable if rule(i)]
        if chosen:
            return chosen
    return []
