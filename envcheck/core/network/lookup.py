"""Names to addresses within a deadline, and which addresses are loopback.

``getaddrinfo`` has no timeout of its own (a dead DNS server stalls it for the resolver's
retries, 5 s each by default): it runs in a daemon thread that is abandoned at the
deadline.
"""

import ipaddress
import socket
import threading


def resolve(name, seconds):
    """(addresses in getaddrinfo's order, None) or ([], why)."""
    box: dict = {}

    def work():
        try:
            infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
            box["addrs"] = list(dict.fromkeys(info[4][0] for info in infos))
        except (OSError, UnicodeError) as exc:
            box["error"] = getattr(exc, "strerror", None) or str(exc)

    thread = threading.Thread(target=work, name="envcheck-resolve", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return [], "no answer from the resolver within %g s" % seconds
    if "error" in box:
        return [], box["error"]
    return box["addrs"], None


def is_loopback(address):
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def bindable(address):
    """Whether a socket can bind ``address`` here: gloo's test of a usable local address."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
        return True
    except OSError:
        return False
