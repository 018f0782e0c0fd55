"""What each rank runs with, compared across ranks: the odd hosts, one finding a field.

Compared: torch (version and git hash), the CUDA torch was built with, the cuDNN and NCCL
it *loaded* (``ncclGetVersion`` of the libnccl in this process, whose path is read from
/proc/self/maps: an LD_LIBRARY_PATH or LD_PRELOAD libnccl wins over the one pip
installed), the NVIDIA driver (/proc/driver/nvidia/version: no nvidia-smi, no
subprocess), Python, the numpy this interpreter would import, and every NCCL_*, GLOO_* and
TORCH_* variable. Which difference breaks a job is the matrix's word, not this module's:
each difference is one *finding*, ``"FIELD differs: X on node2, Y on node1"``, that
``matrix/verdicts`` judges against the ``hosts.skew`` entries of
``matrix/data/expectations/hosts.toml``.

The reference value of a field is the one most ranks have (a tie: rank 0's); the ranks
that differ from it are the odd ones, and only they fail, so that the report names their
hosts.
"""

import hashlib
import os
import platform

from ...worker.hazards import numpy_version
from ...worker.environment import nccl_version_string, relevant_env

# (key, how a finding names it), in the order findings are listed.
FIELDS = (("torch", "torch"), ("torch_git", "torch git"), ("cuda", "CUDA"),
          ("cudnn", "cuDNN"), ("nccl", "NCCL"), ("driver", "NVIDIA driver"),
          ("python", "Python"), ("numpy", "numpy"))
ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_")
UNSET = "unset"


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def loaded_library(name, maps="/proc/self/maps"):
    """The path of the first mapped file whose name starts with ``name`` (libnccl.so),
    or None."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith(name):
                    return path
    except OSError:
        pass
    return None


def driver_version(path="/proc/driver/nvidia/version"):
    """The kernel module's version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module
    550.54.14 ..."), or None where there is no NVIDIA driver."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = f.readline().split()
    except OSError:
        return None
    found = [w for w in words if w[:1].isdigit() and "." in w]
    return found[0] if found else None


def facts(torch):
    """This rank's side of the comparison: {field: value}, None where absent, and the
    variables (secret values replaced by a digest that never leaves the ranks)."""
    cuda = getattr(torch.version, "cuda", None)
    nccl = None
    if cuda:
        version = _safe(lambda: nccl_version_string(torch.cuda.nccl.version()))
        if version:
            nccl = version
    out = {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "cuda": cuda,
        "cudnn": _safe(lambda: str(torch.backends.cudnn.version())) if cuda else None,
        "nccl": nccl,
        "driver": driver_version(),
        "python": platform.python_version(),
        "numpy": numpy_version()[1],
    }
    env = {}
    shown = relevant_env()
    for name in sorted(os.environ):
        if name.startswith(ENV_PREFIXES) and name in shown:
            env[name] = _comparable(shown[name], os.environ[name])
    out["env"] = env
    out["nccl_path"] = loaded_library("libnccl") if cuda else None
    return out


def _comparable(shown, raw):
    """What ranks compare: the value as a report may show it (core.redact), and where
    redaction hid something, a digest of the real value after a NUL, so that two
    different secrets still differ. The digest never reaches a record (``_shown``)."""
    if shown == raw:
        return raw
    return shown + "\0" + hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()


def absent_reason(field, torch):
    """Why a field is None on this rank, for the detail line."""
    if field in ("cuda", "cudnn", "nccl") and not getattr(torch.version, "cuda", None):
        return "CPU build of torch: no CUDA, cuDNN or NCCL"
    if field == "driver":
        return "no NVIDIA driver (/proc/driver/nvidia/version)"
    return None


def _shown(field, value):
    if value is None:
        return UNSET if field.startswith(ENV_PREFIXES) else "none"
    return value.split("\0")[0]


def _reference(values):
    """The value most ranks have; a tie goes to rank 0's."""
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    best = max(counts.values())
    return next(v for v in values if counts[v] == best)


def _hosts_of(ranks, hosts):
    return ", ".join(dict.fromkeys(hosts[r] for r in ranks))


def compare(all_facts, hosts):
    """(findings, odd ranks): a finding per field that differs between ranks,
    ``"numpy differs: 2.2.6 on node2, 2.4.6 on node1, node3"``, odd hosts first."""
    fields = [(key, label) for key, label in FIELDS]
    names = sorted({n for f in all_facts for n in f["env"]})
    fields += [("env:" + n, n) for n in names]
    findings, odd = [], set()
    for key, label in fields:
        if key.startswith("env:"):
            values = [f["env"].get(key[4:]) for f in all_facts]
            field = key[4:]
        else:
            values = [f.get(key) for f in all_facts]
            field = key
        if len(set(values)) < 2:
            continue
        ref = _reference(values)
        groups = {}
        for rank, v in enumerate(values):
            groups.setdefault(v, []).append(rank)
        odd.update(r for v, ranks in groups.items() if v != ref for r in ranks)
        order = [v for v in groups if v != ref] + [ref]
        findings.append("%s differs: %s" % (label, ", ".join(
            "%s on %s" % (_shown(field, v), _hosts_of(groups[v], hosts)) for v in order)))
    return findings, sorted(odd)


def advice(findings, all_facts, hosts, odd):
    """What to do, a clause per kind of finding, naming the reference value."""
    ok = [r for r in range(len(all_facts)) if r not in odd]
    ref = all_facts[ok[0]] if ok else all_facts[0]
    odd_hosts = _hosts_of(odd, hosts) or "the odd host"
    out = []
    for text in findings:
        field = text.split(" differs:")[0]
        if field in ("torch", "torch git", "CUDA"):
            out.append("install the same torch build on every host (%s on %s): pip install "
                       "torch==%s with the same index URL" % (ref["torch"], hosts[ok[0]] if ok
                                                               else hosts[0], ref["torch"]))
        elif field == "NCCL":
            out.append("load the same NCCL on every host: %s loads another libnccl (check "
                       "LD_LIBRARY_PATH and LD_PRELOAD there; the torch wheel's own NCCL "
                       "is %s)" % (odd_hosts, ref["nccl"]))
        elif field == "numpy":
            out.append("pip install numpy==%s on %s" % (ref["numpy"], odd_hosts))
        elif field == "Python":
            out.append("use the same Python (%s) on every host" % ref["python"])
        elif field in ("cuDNN", "NVIDIA driver"):
            out.append("install the same %s on every host (%s)" % (field, ref[{
                "cuDNN": "cudnn", "NVIDIA driver": "driver"}[field]] or "none"))
        else:
            value = ref["env"].get(field)
            if value is None:
                out.append("unset %s on %s, as on the other hosts (its shell profile, the "
                           "job script or /etc/nccl.conf sets it)" % (field, odd_hosts))
            else:
                out.append("export %s=%s on %s, as on the other hosts"
                           % (field, _shown(field, value), odd_hosts))
    fields = [t.split(" differs:")[0] for t in findings]
    head = "make %s match the other hosts (%s)" % (odd_hosts, ", ".join(fields))
    return "%s: %s" % (head, "; ".join(dict.fromkeys(out)))
