"""The checks a rank runs before ``init_process_group``: each a plain result, none a hang.

Reported as checks of the pseudo-probe ``setup`` (``probes/catalog.py``: SETUP_CHECKS):

- ``open_files``, ``processes``: this host's ``ulimit -n`` and ``ulimit -u`` leave a
  rank of this job what it needs (``core/limits.py``: measured): a limit is a finding
  about the host, never a refusal;
- ``tmpdir``: the temporary directory the job's Python gets is the one TMPDIR names, and
  has room (``core/limits.py``); not fatal: nothing before the probes writes there;
- ``master_addr``: MASTER_ADDR resolves here (``compare`` then holds each host's answer
  against the others');
- ``master_port``: MASTER_ADDR:MASTER_PORT answers from here: torchrun's agent store,
  which is up before any rank starts, or under srun rank 0's, waited for;
- ``host_name``: with several hosts, this host's own name does not resolve to a loopback
  address, which gloo would hand the other hosts as this host's address;
- ``socket_interface``: the interface gloo or NCCL will use exists here and, with
  several hosts, is not a loopback one and reaches MASTER_ADDR.

A failed one is *fatal* (``tmpdir`` excepted): the rank then skips
``init_process_group``, which would only wait for the others until its timeout, and ends
at once with the host and the fix.
"""

import os
import socket
import time

from . import interfaces as ifs
from .reach import OPEN, REFUSED, SILENT, UNREACHABLE, connect, source_for
from .lookup import bindable, is_loopback, resolve
from .. import limits

CHECKS = ("open_files", "processes", "tmpdir", "master_addr", "master_port", "host_name",
          "socket_interface")
RESOLVE_S = 3.0  # a resolver slower than this is a problem of its own
CONNECT_S = 3.0  # one connect attempt; a LAN answers in well under a millisecond
RETRY_S = 0.1
# The setup record's error type when init_process_group was not attempted: this rank's
# own pre-check failed, or another rank's did (a consequence here).
PRECHECK_FAILED = "PrecheckFailed"
PEER_PRECHECK_FAILED = "PeerPrecheckFailed"
# Ranks that never said how their pre-checks went: their host cannot reach the store.
PEERS_SILENT = "PeersSilent"


class Situation:
    """What the checks need to know about this rank."""

    def __init__(self, environ, backend, host, several_hosts, store_here, wait_s,
                 own_store, world_size=1, local_world_size=1):
        self.environ = environ
        self.world_size, self.local_world_size = world_size, local_world_size
        self.backend = backend
        self.host = host  # the name envcheck reports (ENVCHECK_HOST or the host name)
        self.several_hosts = several_hosts
        self.store_here = store_here  # this rank hosts the store (srun's rank 0)
        self.wait_s = wait_s  # how long a store that is not up yet may be waited for
        self.own_store = own_store  # envcheck run: its own store, on this host
        self.addr = environ.get("MASTER_ADDR") or ""
        self.port = int(environ.get("MASTER_PORT") or 0)
        self.ifaces = ifs.interfaces()
        self.target = None  # MASTER_ADDR's first address, once resolved
        self.port_failed = False  # master_port failed: nothing else can be reached
        self.same_machine = False  # MASTER_ADDR is loopback and the job's store is here


def _result(check, outcome, detail, advice=None, fatal=True, **data):
    return {"check": check, "outcome": outcome, "detail": detail, "advice": advice,
            "data": data, "fatal": fatal}


def master_addr(s):
    addrs, why = resolve(s.addr, RESOLVE_S)
    if not addrs:
        return _result("master_addr", "failed",
                       "MASTER_ADDR=%s does not resolve on %s: %s" % (s.addr, s.host, why),
                       "on %s, make %s resolve to the rendezvous host's address (its "
                       "/etc/hosts or DNS: getent hosts %s), or set MASTER_ADDR to that "
                       "address" % (s.host, s.addr, s.addr), name=s.addr)
    s.target = addrs[0]
    local = sorted({a for i in s.ifaces.values() for a in i.addresses})
    data = dict(name=s.addr, address=s.target, local=local)
    if s.several_hosts and is_loopback(s.target):
        # Every rank that rendezvouses on a loopback address runs on this machine (the
        # "hosts" are this machine's: tests, a launcher's --node-rank on one box), so a
        # loopback name or interface below is right. Another host's loopback MASTER_ADDR
        # reaches no store: that one fails here.
        s.same_machine = (s.store_here or s.own_store or _holds_rank0(s)
                          or _store_answers(s))
    if s.several_hosts and is_loopback(s.target) and not s.same_machine:
        return _result("master_addr", "failed",
                       "%s resolves MASTER_ADDR=%s to %s, a loopback address: its ranks "
                       "would look for the rendezvous on %s itself" % (
                           s.host, s.addr, s.target, s.host),
                       "on %s, make %s resolve to the rendezvous host's address (its "
                       "/etc/hosts or DNS), or set MASTER_ADDR to that address"
                       % (s.host, s.addr), **data)
    shown = s.addr if s.addr == s.target else "%s (%s)" % (s.addr, s.target)
    return _result("master_addr", "passed", "%s on %s" % (shown, s.host), **data)


def _store_answers(s):
    """The job's store answers at MASTER_ADDR:MASTER_PORT from here, within the wait a
    store that is not up yet gets (rank 0's, under srun; torchrun's agent store is up
    before any rank starts)."""
    agent = s.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    deadline = time.monotonic() + s.wait_s
    while True:
        if connect(s.target, s.port, CONNECT_S)[0] == OPEN:
            return True
        if agent or time.monotonic() + RETRY_S >= deadline:
            return False
        time.sleep(RETRY_S)


def _holds_rank0(s):
    """Rank 0 runs on this host (torchrun's agent store is on rank 0's host)."""
    try:
        return int(s.environ.get("RANK", "0")) == int(s.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return False


def _listeners(port):
    """The inodes of the sockets listening on TCP ``port`` in this network namespace
    (/proc/net/tcp and tcp6): read only, so that nothing here races the store's bind."""
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name, encoding="ascii", errors="replace") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" \
                    and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def _own_sockets():
    found = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:
        pass
    return found


def _taken(port):
    """Whether a process other than this one listens on ``port`` here: rank 0 under srun
    hosts the job's store there (its own listener, made by now or soon, is no finding)."""
    others = _listeners(port) - _own_sockets()
    return "another process listens on it" if others else None


def master_port(s):
    where = "%s:%d" % (s.addr, s.port)
    if s.target and s.target != s.addr:
        where += " (%s)" % s.target
    if s.own_store:
        return _result("master_port", "skipped", "envcheck run's own store on this host")
    if s.store_here:
        taken = _taken(s.port)
        if taken:
            # The others' connects then meet whatever holds it (no answer, or not a
            # store's): this rank's words are the cause, theirs the consequence.
            return _result("master_port", "failed",
                           "MASTER_PORT %d is already taken on %s, where rank 0 hosts the "
                           "job's store: %s (another job, or a leftover process of an "
                           "earlier one)" % (s.port, s.host, taken),
                           "give each job on a host its own port (export MASTER_PORT= a "
                           "free one, e.g. from the job id), or end what holds it: ss "
                           "-ltnp 'sport = :%d' on %s names it" % (s.port, s.host),
                           port=s.port, cause=True)
        return _result("master_port", "skipped",
                       "rank 0 hosts the store at %s: the other ranks check it" % where)
    if not s.target:
        return _result("master_port", "skipped", "MASTER_ADDR does not resolve")
    deadline = time.monotonic() + s.wait_s
    t0 = time.monotonic()
    agent = s.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    while True:
        kind, message = connect(s.target, s.port, CONNECT_S)
        # torchrun's agent store is up before any rank starts; rank 0's (srun) may not be.
        if kind == OPEN or agent or time.monotonic() + RETRY_S >= deadline:
            break
        time.sleep(RETRY_S)
    if kind == OPEN:
        return _result("master_port", "passed", "%s answers from %s in %.1f ms" % (
            where, s.host, 1000 * (time.monotonic() - t0)), address=s.target, port=s.port)
    store = "torchrun's rendezvous store" if agent else "rank 0's store"
    if kind == REFUSED:
        why = ("%s answered but nothing listens on port %d: %s is not there (MASTER_ADDR "
               "names another host than rank 0's here), or a firewall rejects the port"
               % (s.target, s.port, store))
    elif kind == SILENT:
        why = ("nothing came back from %s on port %d (%s): a firewall drops the port, on "
               "%s, on the rendezvous host or between them, or that host is down" % (
                   s.target, s.port, message, s.host))
    else:
        why = "%s cannot reach %s: %s" % (s.host, s.target, message)
    return _result("master_port", "failed",
                   "%s does not answer from %s: %s" % (where, s.host, why),
                   "let %s connect to %s on TCP port %d (and, for gloo and NCCL, on the "
                   "ports their connections open between the hosts): check the firewall "
                   "on both hosts (iptables -L, nft list ruleset) and, on %s, ip route get "
                   "%s; getent hosts %s must give the rendezvous host's address"
                   % (s.host, s.target, s.port, s.host, s.target, s.addr),
                   address=s.target, port=s.port, answer=kind)


def _own_name_address(name):
    """What gloo picks from this host's name: the first address a socket can bind, or
    None (gloo then falls back to the loopback address). Also every address found."""
    addrs, _ = resolve(name, RESOLVE_S)
    return next((a for a in addrs if bindable(a)), None), addrs


def _hosts_line(name):
    """The /etc/hosts line that maps ``name`` to a loopback address, or None."""
    try:
        with open("/etc/hosts", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split("#", 1)[0].split()
                if len(fields) > 1 and name in fields[1:] and is_loopback(fields[0]):
                    return " ".join(fields)
    except OSError:
        pass
    return None


def _reaching(s):
    """(interface, address) this host reaches MASTER_ADDR from, when it is not loopback."""
    source = source_for(s.target) if s.target else None
    iface = ifs.owner(source, s.ifaces) if source else None
    if iface is None or iface.loopback or is_loopback(source):
        return None, None
    return iface, source


def host_name(s):
    name = socket.gethostname()
    if not s.several_hosts:
        return _result("host_name", "skipped", "one host: no other host needs to reach %s"
                       % name)
    chosen, addrs = _own_name_address(name)
    used_by_gloo = s.backend == "gloo" and not s.environ.get("GLOO_SOCKET_IFNAME")
    if s.same_machine:
        return _result("host_name", "passed", "%s resolves to %s; MASTER_ADDR %s is a "
                       "loopback address, so every rank is on this machine" % (
                           name, chosen, s.target), name=name, address=chosen)
    if chosen is not None and not is_loopback(chosen):
        return _result("host_name", "passed", "%s resolves to %s" % (name, chosen),
                       name=name, address=chosen)
    iface, good = _reaching(s)
    shown = chosen or "nothing this host can bind (gloo then uses 127.0.0.1)"
    line = _hosts_line(name)
    fix = ("on %s, in /etc/hosts, replace '%s' with '%s %s'" % (s.host, line, good, name)
           if line and good else
           "on %s, add '%s %s' to /etc/hosts" % (s.host, good, name) if good else
           "on %s, make %s resolve to the address the other hosts reach it at" % (
               s.host, name))
    if iface is not None:
        fix += ", or set GLOO_SOCKET_IFNAME=%s" % iface.name
    if not used_by_gloo:
        why = ("GLOO_SOCKET_IFNAME picks gloo's interface" if s.backend == "gloo" else
               "NCCL picks its interface by name, not by host name")
        return _result("host_name", "passed",
                       "%s resolves to %s, a loopback address; not used here (%s), but a "
                       "gloo group without GLOO_SOCKET_IFNAME would hand it to the other "
                       "hosts" % (name, shown, why), name=name, address=chosen,
                       loopback=True)
    return _result("host_name", "failed",
                   "%s's own name resolves to %s%s: gloo on %s tells the other hosts to "
                   "connect to that, a loopback address, so they cannot" % (
                       name, shown, " (/etc/hosts: '%s')" % line if line else "", s.host),
                   fix, name=name, address=chosen, resolved=addrs, hosts_line=line)


def socket_interface(s):
    var = "GLOO_SOCKET_IFNAME" if s.backend == "gloo" else "NCCL_SOCKET_IFNAME"
    value = s.environ.get(var)
    names = ", ".join(n for n, i in s.ifaces.items() if i.addresses)
    if s.backend == "gloo" and value:
        picked, missing = [], []
        for n in (x.strip() for x in value.split(",")):
            if n in s.ifaces and s.ifaces[n].addresses:
                picked.append(s.ifaces[n])
            else:
                missing.append(n)
        if missing:
            return _fail_iface(s, var, value, "%s=%s: %s has no interface %s with an "
                               "address (interfaces here: %s)" % (
                                   var, value, s.host, ", ".join(missing), names))
        how = "%s=%s" % (var, value)
    elif s.backend == "gloo":
        chosen, _ = _own_name_address(socket.gethostname())
        iface = ifs.owner(chosen, s.ifaces) if chosen else s.ifaces.get("lo")
        if iface is None:
            return _result("socket_interface", "passed",
                           "gloo uses %s (this host's name)" % chosen)
        picked, how = [iface], "gloo's default (this host's name)"
    else:
        picked = ifs.nccl_matches(value, s.ifaces) if value else ifs.nccl_default(s.ifaces)
        if not picked:
            return _fail_iface(s, var, value or "(unset)", "%s selects no interface with "
                               "an address on %s (interfaces here: %s)" % (
                                   "%s=%s" % (var, value) if value else "NCCL's default",
                                   s.host, names))
        picked = picked[:1]  # NCCL's bootstrap listens on the first
        how = "%s=%s" % (var, value) if value else "NCCL's default"
    iface = picked[0]
    if not s.several_hosts or (s.same_machine and not s.port_failed):
        return _result("socket_interface", "passed", "%s: %s (%s) on %s" % (
            how, iface.name, ", ".join(iface.addresses[:2]), s.host), interface=iface.name)
    if iface.loopback or all(is_loopback(a) for a in iface.addresses):
        return _fail_iface(s, var, value or iface.name,
                           "%s: %s on %s is a loopback interface (%s): the other hosts "
                           "cannot reach it" % (how, iface.name, s.host,
                                                ", ".join(iface.addresses[:2])))
    if s.port_failed:
        return _result("socket_interface", "skipped",
                       "%s: %s on %s; whether it reaches MASTER_ADDR is not known, since "
                       "MASTER_ADDR does not answer from here at all (see master_port)" % (
                           how, iface.name, s.host), interface=iface.name)
    if s.target:
        source = next((a for a in iface.addresses if (":" in a) == (":" in s.target)), None)
        kind, message = connect(s.target, s.port, CONNECT_S, device=iface.name,
                                source=source) if source else (UNREACHABLE, "no address")
        if kind not in (OPEN, REFUSED):
            return _fail_iface(s, var, value or iface.name,
                               "%s: %s (%s) on %s does not reach MASTER_ADDR %s: %s" % (
                                   how, iface.name, source, s.host, s.target, message))
    return _result("socket_interface", "passed", "%s: %s (%s) on %s reaches %s" % (
        how, iface.name, ", ".join(iface.addresses[:2]), s.host, s.target or s.addr),
        interface=iface.name)


def _fail_iface(s, var, value, detail):
    iface, source = _reaching(s)
    if iface is not None and iface.name == value:
        iface = None  # the one that failed: no advice to set it again
    if not s.several_hosts:
        names = [n for n, i in s.ifaces.items() if i.addresses]
        advice = "on %s, unset %s, or set it to one of its interfaces: %s" % (
            s.host, var, ", ".join(names))
    elif iface is not None:
        advice = ("on %s, set %s=%s (%s reaches MASTER_ADDR %s from %s)" % (
            s.host, var, iface.name, iface.name, s.target, source))
    else:
        advice = ("on %s, set %s to an interface that reaches MASTER_ADDR (ip route get "
                  "%s names it)" % (s.host, var, s.target or s.addr))
    return _result("socket_interface", "failed", detail, advice, variable=var, value=value,
                   suggested=iface.name if iface else None)


def open_files(s):
    outcome, detail, advice, data = limits.open_files(
        s.world_size, s.local_world_size, s.backend, s.host)
    return _result("open_files", outcome, detail, advice, **data)


def processes(s):
    outcome, detail, advice, data = limits.processes(s.local_world_size, s.host)
    return _result("processes", outcome, detail, advice, **data)


def tmpdir(s):
    outcome, detail, advice, data = limits.tmpdir(s.environ, s.host, s.local_world_size)
    return _result("tmpdir", outcome, detail, advice, fatal=False, **data)


def run(situation):
    """Every pre-check, in order, each with its seconds."""
    out = []
    for check in (open_files, processes, tmpdir, master_addr, master_port, host_name,
                  socket_interface):
        t0 = time.monotonic()
        try:
            result = check(situation)
        except Exception as exc:  # a bug here must not cost the run: say so, go on
            result = _result(check.__name__, "skipped", "could not check: %s: %s" % (
                type(exc).__name__, exc))
        result["seconds"] = round(time.monotonic() - t0, 6)
        if result["check"] == "master_port" and result["outcome"] == "failed":
            situation.port_failed = True
        out.append(result)
    return out
