"""A real SLURM on the test cluster: munged, slurmctld on host 1, one slurmd per host.

Debian's slurm-wlm and munge, configured here and nowhere else: one munged with its
own key, socket, PID and seed files (its log: munge/munged.out); a slurm.conf written
for the cluster (its own state, spool, PID and log files, no accounting,
proctrack/linuxproc, task/none, select/cons_tres); slurmctld inside host 1's
namespaces; one ``slurmd -N nodeN`` inside each host's namespaces (its network, name
and /tmp), so that the tasks it starts run "on" that host. Every file lives in one
directory, ``Slurm.dir``, that every host sees at the same path (the cluster keeps it
visible under each host's private /tmp). The machine's own /etc/munge, /run/munge,
/etc/slurm and /var/spool are not used: commands find this SLURM through
``SLURM_CONF`` (``Slurm.env()``), and on the hosts /etc/slurm is this SLURM's etc/
(a bind mount in each host's private mount namespace), as on a real node.

    with Cluster(3, base=base, keep=[slurm_dir]) as c, Slurm(c, slurm_dir) as s:
        s.run(["srun", "-N2", "--ntasks-per-node", "2", "hostname"])   # from host 1

Every daemon runs in the foreground as a child of this process, so it is stopped by its
pid (``Slurm.stop``: SIGTERM, then SIGKILL), and the directory is removed. The daemons'
pids on the hosts (slurmctld, its slurmscriptd, each slurmd) are registered as the
hosts' *daemons* (``Host.daemons`` in tests/cluster/__init__.py), so the cluster's
"nothing left on a host" checks do not count them; the steps they start (slurmstepd,
the tasks) are counted.

By hand: ``python -m tests.cluster.slurm 3`` (docs/cluster-tests.md, "SLURM").
"""

import os
import shutil
import signal
import subprocess
import time

from . import Started

NEEDED = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")
CTLD_PORT = 6817   # each cluster has its own network namespaces: no other SLURM can
SLURMD_PORT = 6818  # be listening on these there
CPUS = 2           # per node, whatever the machine has (config_overrides)
ETC = "/etc/slurm"
HEALTHCHECK = "envcheck-healthcheck.sh"  # HealthCheckProgram, in each host's /etc/slurm
NOOP_HEALTHCHECK = "#!/bin/sh\nexit 0\n"


def unavailable():
    """Why this machine cannot run the test SLURM, in one line; None when it can."""
    missing = [t for t in NEEDED if shutil.which(t) is None]
    if missing:
        return "no %s on PATH (apt-get install slurm-wlm munge)" % ", ".join(missing)
    return None


def version():
    """slurmd's version line, e.g. 'slurm-wlm 22.05.8'."""
    return subprocess.run(["slurmd", "-V"], capture_output=True, text=True).stdout.strip()


CONF = """\
# Written by tests/cluster/slurm.py for one test session; removed with it.
ClusterName={cluster_name}
SlurmctldHost={first}({first_addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={dir}/ctld
SlurmctldPidFile={dir}/ctld/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdSpoolDir={dir}/%n
SlurmdPidFile={dir}/%n/slurmd.pid
SlurmdLogFile={dir}/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SwitchType=switch/none
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
HealthCheckProgram={etc}/{healthcheck}
HealthCheckInterval=3600
HealthCheckNodeState=ANY
ReturnToService=2
KillWait=2
MinJobAge=5
MessageTimeout=10
TCPTimeout=2
SlurmdTimeout=60
InactiveLimit=0
{extra}
{nodes}
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class Slurm(Started):
    """The cluster's SLURM; see the module docstring."""

    def __init__(self, cluster, directory, extra_conf=""):
        self.cluster = cluster
        self.dir = directory
        self.etc = os.path.join(directory, "etc")  # each host's /etc/slurm
        self.conf = os.path.join(self.etc, "slurm.conf")
        self.healthcheck = os.path.join(self.etc, HEALTHCHECK)
        self.munge_dir = os.path.join(directory, "munge")
        self.munge_socket = os.path.join(self.munge_dir, "munge.socket")
        self.extra_conf = extra_conf
        self.munged = None
        self.slurmctld = None
        self.slurmds = {}
        self.mounted = []
        self.started_s = None

    # --- environment and commands -------------------------------------------------

    def env(self, base=None, **extra):
        """``base`` (default: this process's environment) pointed at this SLURM."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = self.conf
        env.update(extra)
        return env

    def run(self, cmd, host=None, env=None, timeout=60, check=False):
        """A SLURM command (srun, salloc, sinfo...) run on ``host`` (default: host 1)."""
        host = host or self.cluster.hosts[0]
        return host.run(cmd, env=self.env(env), timeout=timeout, check=check)

    def log(self, name):
        """A daemon's log: 'slurmctld', 'munged' or a host name (its slurmd)."""
        path = {"slurmctld": os.path.join(self.dir, "slurmctld.log"),
                "munged": os.path.join(self.munge_dir, "munged.out")}.get(
            name, os.path.join(self.dir, name, "slurmd.log"))
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError as exc:
            return "(no log: %s)" % exc

    def logs(self, tail=3000):
        names = ["munged", "slurmctld"] + [h.name for h in self.cluster.hosts]
        return "\n".join("--- %s ---\n%s" % (n, self.log(n)[-tail:]) for n in names)

    # --- start and stop (``with``: see cluster.Started) --------------------------------

    def write_conf(self):
        hosts = self.cluster.hosts
        nodes = "\n".join(
            "NodeName=%s NodeAddr=%s CPUs=%d RealMemory=1000 State=UNKNOWN"
            % (h.name, h.addr, CPUS) for h in hosts)
        text = CONF.format(cluster_name=self.cluster.prefix, first=hosts[0].name,
                           first_addr=hosts[0].addr, ctld_port=CTLD_PORT,
                           slurmd_port=SLURMD_PORT, munge_socket=self.munge_socket,
                           dir=self.dir, extra=self.extra_conf, nodes=nodes,
                           etc=ETC, healthcheck=HEALTHCHECK)
        with open(self.conf, "w") as f:
            f.write(text)
        # slurmd loads a cgroup plugin whatever the other plugins are; name it, so that it
        # does not look for a hierarchy (a host's /sys is its network namespace's own).
        with open(os.path.join(self.etc, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
        self.set_healthcheck(NOOP_HEALTHCHECK)

    def set_healthcheck(self, text):
        """The HealthCheckProgram's text (every host's /etc/slurm/envcheck-healthcheck.sh);
        slurmd runs it when it starts (``restart_slurmd``) and every hour."""
        tmp = self.healthcheck + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, self.healthcheck)

    def _start_munged(self):
        os.makedirs(self.munge_dir, exist_ok=True)
        os.chmod(self.munge_dir, 0o755)  # clients connect to the socket here
        key = os.path.join(self.munge_dir, "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        # In the foreground munged logs to stderr (not to --log-file): munged.out.
        out = open(os.path.join(self.munge_dir, "munged.out"), "w")
        self.munged = subprocess.Popen(
            ["munged", "--foreground", "--force", "--socket", self.munge_socket,
             "--key-file", key, "--pid-file", os.path.join(self.munge_dir, "munged.pid"),
             "--seed-file", os.path.join(self.munge_dir, "munged.seed"),
             "--num-threads", "4"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self._wait(lambda: os.path.exists(self.munge_socket), 10, "munged's socket",
                   self.munged)

    def start(self, timeout=30.0):
        t0 = time.monotonic()
        why = unavailable()
        if why:
            raise RuntimeError(why)
        os.makedirs(os.path.join(self.dir, "ctld"), exist_ok=True)
        os.makedirs(self.etc, exist_ok=True)
        for h in self.cluster.hosts:
            os.makedirs(os.path.join(self.dir, h.name), exist_ok=True)
        self.write_conf()
        self._start_munged()
        env = self.env()
        first = self.cluster.hosts[0]
        out = open(os.path.join(self.dir, "slurmctld.out"), "w")
        self.slurmctld = first.popen(["slurmctld", "-D", "-c", "-i", "-f", self.conf],
                                     env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        first.daemons.add(self.slurmctld.pid)
        self._wait(lambda: self.run(["scontrol", "ping"], timeout=10).stdout.count("UP") > 0,
                   timeout, "slurmctld to answer 'scontrol ping'", self.slurmctld)
        for h in self.cluster.hosts:
            if os.path.isdir(ETC):
                # The host's /etc/slurm is this SLURM's (its private mount namespace; the
                # machine's stays as it is): what slurmd runs (a health check, a prolog)
                # finds slurm.conf where a real node has it, with no SLURM_CONF.
                h.run(["mount", "--bind", self.etc, ETC])
                self.mounted.append(h)
            self._start_slurmd(h, env)
        self.wait_idle(timeout - (time.monotonic() - t0))
        # What runs on the hosts now is this SLURM's: the daemons and what they forked
        # (slurmctld's slurmscriptd). Steps started later are not daemons.
        for h in self.cluster.hosts:
            h.daemons.update(h.processes())
        self.started_s = time.monotonic() - t0

    def _start_slurmd(self, host, env=None):
        out = open(os.path.join(self.dir, host.name, "slurmd.out"), "a")
        p = host.popen(["slurmd", "-D", "-N", host.name, "-f", self.conf],
                       env=env or self.env(), stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.slurmds[host.name] = p
        host.daemons.add(p.pid)
        return p

    def restart_slurmd(self, *hosts, timeout=30.0):
        """Stop the slurmd of each of ``hosts`` and start it again, as a node's reboot
        would: it runs the HealthCheckProgram, then registers. Returns once slurmctld
        has seen every new slurmd register (its SlurmdStartTime changed)."""
        before = {h.name: self.node(h.name).get("SlurmdStartTime") for h in hosts}
        old = [(h, self.slurmds.pop(h.name)) for h in hosts]
        for _, p in old:
            p.terminate()
        for h, p in old:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            h.daemons.discard(p.pid)
        time.sleep(1.1)  # SlurmdStartTime has a resolution of one second
        for h in hosts:
            self._start_slurmd(h)
        self._wait(lambda: all(self.node(n).get("SlurmdStartTime") != t
                               for n, t in before.items()), timeout,
                   "the new slurmd of %s to register" % ", ".join(before))

    def node(self, name):
        """``scontrol show node NAME`` as a dict (State, Reason, SlurmdStartTime...)."""
        line = self.run(["scontrol", "-o", "show", "node", name], timeout=10).stdout.strip()
        fields, key, reason = {}, None, None
        if " Reason=" in line:  # free text, last: 'Reason=TEXT [root@2026-11-23T15:55:00]'
            line, reason = line.split(" Reason=", 1)
        for word in line.split(" "):
            if "=" in word:
                key, value = word.split("=", 1)
                fields[key] = value
            elif key:  # a value with spaces (Reason=...)
                fields[key] += " " + word
        if reason is not None:
            fields["Reason"] = reason
        return fields

    def states(self):
        """Each node's state as sinfo says it: {'node1': 'idle', ...}."""
        proc = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
        return dict(line.split(None, 1) for line in proc.stdout.splitlines() if line.strip())

    def wait_idle(self, timeout=30.0, names=None):
        names = set(names or (h.name for h in self.cluster.hosts))
        self._wait(lambda: all(s == "idle" for n, s in self.states().items() if n in names)
                   and names <= set(self.states()), timeout, "every node idle in sinfo")

    def _wait(self, ready, timeout, what, proc=None):
        deadline = time.monotonic() + max(timeout, 1.0)
        while True:
            try:
                if ready():
                    return
            except (subprocess.TimeoutExpired, OSError):
                pass
            if proc is not None and proc.poll() is not None:
                raise RuntimeError("waiting for %s: it exited %s\n%s"
                                   % (what, proc.returncode, self.logs()))
            for name, p in self.slurmds.items():
                if p.poll() is not None:
                    raise RuntimeError("waiting for %s: slurmd on %s exited %s\n%s"
                                       % (what, name, p.returncode, self.logs()))
            if time.monotonic() > deadline:
                raise RuntimeError("timed out after %.0f s waiting for %s\n%s"
                                   % (timeout, what, self.logs()))
            time.sleep(0.2)

    def stop(self):
        """Stop every daemon by its pid (SIGTERM, then SIGKILL) and remove the directory;
        safe to call twice, or half-started."""
        procs = list(self.slurmds.items()) + [("slurmctld", self.slurmctld),
                                              ("munged", self.munged)]
        for _, p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for _, p in procs:
            if p is None:
                continue
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for h in self.mounted:
            h.run(["umount", ETC], check=False)
        self.mounted = []
        for h in self.cluster.hosts:
            h.daemons.clear()
        self.slurmds, self.slurmctld, self.munged = {}, None, None
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv=None):
    """By hand: a cluster of N hosts (default 3) with this SLURM, until Ctrl-C."""
    import argparse
    import sys
    import tempfile

    from . import Cluster
    from . import unavailable as no_cluster

    p = argparse.ArgumentParser(prog="python -m tests.cluster.slurm",
                                description="Start the test cluster with a real SLURM; "
                                            "Ctrl-C stops and removes everything.")
    p.add_argument("hosts", nargs="?", type=int, default=3)
    args = p.parse_args(argv)
    why = no_cluster() or unavailable()
    if why:
        sys.exit("cannot start the test SLURM here: %s" % why)
    base = tempfile.mkdtemp(prefix="envcheck-cluster-")
    slurm_dir = os.path.join(base, "slurm")
    os.makedirs(slurm_dir)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        with Cluster(args.hosts, base=base, keep=(slurm_dir,)) as c, Slurm(c, slurm_dir) as s:
            first = c.hosts[0]
            print("%s: %d hosts (%s), SLURM up in %.1f s" % (
                version(), len(c.hosts), ", ".join("%s %s" % (h.name, h.addr)
                                                   for h in c.hosts), s.started_s))
            print("a shell on node1 (its /etc/slurm is this SLURM's):\n"
                  "  nsenter --target %d --net --uts --mount -- env SLURM_CONF=%s bash\n"
                  "  then: sinfo; srun -N2 --ntasks-per-node 2 hostname\n"
                  "logs: %s/slurmctld.log, %s/nodeN/slurmd.log, %s/munged.out\n"
                  "shared by every host at /mnt/shared: %s\n"
                  "Ctrl-C stops it all and removes %s"
                  % (first.holder.pid, s.conf, s.dir, s.dir, s.munge_dir, c.shared, base),
                  flush=True)
            while True:
                signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
