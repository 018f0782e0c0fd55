"""A cluster of real hosts on one machine: network namespaces, veth links, private mounts.

Each host is a Linux network namespace with its own UTS name (hostname), its own /tmp
and /etc/hosts (a private mount namespace), and a veth link into a bridge that only the
cluster's hosts are on. Addresses come from 198.18.0.0/15 (RFC 2544, benchmark labs),
with no default route and no NAT, so nothing can leave the machine. A directory that
every host shares is bind-mounted at ``/mnt/shared`` on each of them.

One long-lived *holder* process per host keeps its namespaces alive; commands run "on"
a host enter them with ``nsenter --target HOLDER``. Everything made here carries the
cluster's prefix, and ``Cluster.stop`` removes it (hosts' processes, by the pids their
namespaces hold, then the namespaces, links and bridge), whatever happened.

    with Cluster(2) as c:                      # node1 198.18.0.1, node2 198.18.0.2
        c.hosts[1].run(["hostname"])           # -> node2
        c.hosts[1].popen([...])                # a process on node2

A contributor can start one by hand: ``python -m tests.cluster 3``, or with SLURM
``python -m tests.cluster.slurm 3`` (see docs/cluster-tests.md). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), ``ip`` (iproute2),
``unshare`` and ``nsenter`` (util-linux).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SUBNET = "198.18.0"
SHARED = "/mnt/shared"
NEEDED = ("ip", "unshare", "nsenter")


def unavailable():
    """Why a cluster cannot be built on this machine, in one line; None when it can."""
    missing = [t for t in NEEDED if shutil.which(t) is None]
    if missing:
        return "no %s on PATH (install iproute2 and util-linux)" % ", ".join(missing)
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN to make network namespaces)"
    probe = "ecprobe%d" % os.getpid()
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return "cannot make a network namespace: %s" % (made.stderr.strip() or "denied")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


# Runs in the host's fresh UTS + mount namespace (inside its network namespace): the
# host's name, its own /etc/hosts and /tmp, the shared directory, then sleep as the
# namespaces' holder. Paths under the machine's /tmp that the host still needs (the
# checkout, its venv) are bind-mounted back at the same paths after /tmp is replaced.
_HOLDER = r'''
set -e
hostname "$EC_NAME"
mount -t tmpfs -o size=64m envcheck-stage /mnt
mkdir -p /mnt/shared /mnt/keep
mount --bind "$EC_SHARED" /mnt/shared
mount --bind "$EC_HOSTS" /etc/hosts
i=0
for p in $EC_KEEP; do
  mkdir -p /mnt/keep/$i && mount --bind "$p" /mnt/keep/$i; i=$((i+1))
done
mount --bind "$EC_TMP" /tmp
i=0
for p in $EC_KEEP; do
  mkdir -p "$p" && mount --bind /mnt/keep/$i "$p"; i=$((i+1))
done
echo ready
exec sleep 2147483647
'''


def _ip(*args, netns=None, check=True):
    cmd = ["ip"] + (["-n", netns] if netns else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), proc.stderr.strip()))
    return proc


class Host:
    """One host of the cluster: its name, address, namespaces and private /tmp."""

    def __init__(self, cluster, index):
        self.cluster = cluster
        self.index = index  # 0-based
        self.name = "node%d" % (index + 1)
        self.addr = "%s.%d" % (SUBNET, index + 1)
        self.netns = "%sh%d" % (cluster.prefix, index + 1)
        self.veth = "%sv%d" % (cluster.prefix, index + 1)  # the bridge's end of its link
        self.root = os.path.join(cluster.base, self.name)
        self.tmp = os.path.join(self.root, "tmp")  # this host's /tmp, seen from outside
        self.hosts_file = os.path.join(self.root, "hosts")
        self.holder = None
        self.daemons = set()  # pids of session-long daemons on this host (slurmd)

    def path(self, inside):
        """Where a path under this host's /tmp lies, seen from the machine."""
        assert inside.startswith("/tmp/"), inside
        return os.path.join(self.tmp, inside[len("/tmp/"):])

    def _enter(self, cmd, cwd=None):
        return (["nsenter", "--target", str(self.holder.pid), "--net", "--uts", "--mount",
                 "--wd=%s" % (cwd or self.cluster.cwd), "--"] + list(cmd))

    def popen(self, cmd, env=None, cwd=None, **kw):
        """Start a process on this host (its network, name and mounts)."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        return subprocess.Popen(self._enter(cmd, cwd), env=env, **kw)

    def run(self, cmd, env=None, cwd=None, timeout=60, check=True):
        proc = subprocess.run(self._enter(cmd, cwd), env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise RuntimeError("on %s: %s exited %d: %s" % (
                self.name, " ".join(cmd), proc.returncode, proc.stderr.strip()))
        return proc

    def pids(self):
        """Every process in this host's network namespace, its holder included."""
        out = _ip("netns", "pids", self.netns, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]

    def processes(self):
        """The host's processes other than its holder and daemons: what a test may have
        left."""
        holder = self.holder.pid if self.holder else None
        return [p for p in self.pids() if p != holder and p not in self.daemons]

    def write_hosts(self, extra=""):
        """This host's /etc/hosts: every host's name and address, then ``extra``."""
        lines = ["127.0.0.1 localhost"] + ["%s %s" % (h.addr, h.name)
                                           for h in self.cluster.hosts]
        with open(self.hosts_file, "w") as f:
            f.write("\n".join(lines) + "\n" + extra)

    def link(self, up):
        """Cut or restore this host's link (the bridge's end of its veth)."""
        _ip("link", "set", self.veth, "up" if up else "down")

    def kill_all(self, sig=signal.SIGKILL):
        """Every process on this host but its holder: the host dies, the host stays."""
        for pid in self.processes():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


class Started:
    """``with X() as x``: ``start()``, and ``stop()`` whatever happens, half-started too."""

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()


class Cluster(Started):
    """``n`` hosts on one bridge; see the module docstring."""

    def __init__(self, n, base=None, prefix=None, keep=()):
        self.prefix = prefix or "ec%x" % (os.getpid() & 0xFFFFF)
        self._own_base = base is None  # made here: removed by stop()
        self.base = base or tempfile.mkdtemp(prefix="envcheck-cluster-")
        self.shared = os.path.join(self.base, "shared")
        self.bridge = "%sbr" % self.prefix
        self.cwd = os.getcwd()
        # Paths under /tmp the hosts must still see: the checkout and the interpreter.
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.keep = [p for p in dict.fromkeys((here, sys.prefix, self.cwd) + tuple(keep))
                     if os.path.realpath(p).startswith("/tmp/")]
        self.hosts = [Host(self, i) for i in range(n)]

    def start(self):
        os.makedirs(self.shared, exist_ok=True)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for h in self.hosts:
            os.makedirs(h.tmp, exist_ok=True)
            os.chmod(h.tmp, 0o1777)
            h.write_hosts()
            _ip("netns", "add", h.netns)
            _ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns",
                h.netns)
            _ip("link", "set", h.veth, "master", self.bridge, "up")
            _ip("addr", "add", "%s/24" % h.addr, "dev", "eth0", netns=h.netns)
            _ip("link", "set", "eth0", "up", netns=h.netns)
            _ip("link", "set", "lo", "up", netns=h.netns)
            env = dict(os.environ, EC_NAME=h.name, EC_SHARED=self.shared,
                       EC_HOSTS=h.hosts_file, EC_TMP=h.tmp, EC_KEEP=" ".join(self.keep))
            h.holder = subprocess.Popen(
                ["ip", "netns", "exec", h.netns, "unshare", "--uts", "--mount",
                 "--propagation", "private", "sh", "-c", _HOLDER],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            line = h.holder.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError("host %s did not start: %s" % (
                    h.name, h.holder.stderr.read().strip()))

    def stop(self):
        """Remove everything this cluster made; safe to call twice, or half-started."""
        for h in self.hosts:
            for pid in h.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if h.holder is not None:
                try:
                    h.holder.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                for stream in (h.holder.stdout, h.holder.stderr):
                    stream.close()
            _ip("netns", "del", h.netns, check=False)
            _ip("link", "del", h.veth, check=False)
        _ip("link", "del", self.bridge, check=False)
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def wait_gone(self, seconds=10.0):
        """Every host's processes (not holders), once they had ``seconds`` to exit."""
        deadline = time.monotonic() + seconds
        while True:
            left = {h.name: h.processes() for h in self.hosts}
            left = {k: v for k, v in left.items() if v}
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)
