"""Many NodeRecords -> one Summary: how many nodes work, the rest grouped by the same
reasons, and the nodes whose driver, GPUs, Python or glibc differ from the majority
(working or not: a node that differs is the next one to break)."""

import collections
import dataclasses
from typing import Optional, Tuple

from ..core.outcomes import ExitCode
from . import hostlist, inputs
from .inputs import FAILS, UNKNOWN, WORKS


@dataclasses.dataclass(frozen=True)
class Group:
    status: str  # fails or unknown
    reasons: Tuple[str, ...]
    hosts: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Outlier:
    fact: str  # driver, gpu_model, gpu_count, python, glibc, asked
    value: object
    hosts: Tuple[str, ...]
    majority: object  # None: no value is on more than half the nodes
    majority_count: int  # nodes with the majority value (or with the most common one)


@dataclasses.dataclass(frozen=True)
class BuildGroup:
    """Nodes pip gives the same build for the same requirement (check answers)."""

    build: str  # "2.6.0+cu124"
    hosts: Tuple[str, ...]
    held_back: Optional[str]  # why not the newest in range: "glibc 2.17 < 2.28"


@dataclasses.dataclass(frozen=True)
class Summary:
    inputs: Tuple[str, ...]
    records: Tuple[inputs.NodeRecord, ...]
    groups: Tuple[Group, ...]
    outliers: Tuple[Outlier, ...]
    problems: Tuple[inputs.Problem, ...]
    builds: Tuple[BuildGroup, ...] = ()  # only when one range gave nodes different builds
    # what was used, with a word about it (a host that answered twice): not a problem
    notes: Tuple[inputs.Problem, ...] = ()

    @property
    def working(self):
        return [r for r in self.records if r.status == WORKS]

    @property
    def exit_code(self):
        if any(g.status == FAILS for g in self.groups):
            return ExitCode.FAILED
        if self.groups or self.problems:
            return ExitCode.CANNOT_JUDGE
        return ExitCode.OK


def _one_per_host(records, notes):
    """One record per host: per kind the newest answer (two of a kind is worth a line),
    then a host's check answer and run report merged: it works only if both say so."""
    by_host = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        by_host[r.host][r.kind].append(r)
    out = []
    for host, kinds in by_host.items():
        newest = []
        for kind, rs in sorted(kinds.items()):
            rs.sort(key=lambda r: (r.created or "", r.path))
            if len(rs) > 1:
                notes.append(inputs.Problem(
                    rs[-1].path, "%s has %d %s answers (%s): using this one, the newest"
                    % (host, len(rs), kind, ", ".join(r.path for r in rs[:-1]))))
            newest.append(rs[-1])
        out.append(newest[0] if len(newest) == 1 else _merge(newest))
    return out


def _merge(records):
    statuses = {r.status for r in records}
    status = FAILS if FAILS in statuses else UNKNOWN if UNKNOWN in statuses else WORKS
    facts = dict(records[0].facts)  # the check answer's (sorted first): every GPU
    for r in records[1:]:
        facts.update({k: v for k, v in r.facts.items() if facts.get(k) is None})
    facts["asked"] = " + ".join(str(r.facts.get("asked")) for r in records)
    return inputs.NodeRecord(records[0].host, ", ".join(r.path for r in records),
                             "+".join(r.kind for r in records), status,
                             tuple(x for r in records for x in r.reasons), facts,
                             max(r.created or "" for r in records))


def _groups(records):
    found = collections.defaultdict(list)
    for r in records:
        if r.status != WORKS:
            found[(r.status, r.reasons)].append(r.host)
    groups = [Group(status, reasons, tuple(sorted(hosts, key=hostlist.natural)))
              for (status, reasons), hosts in found.items()]
    # what fails on the most nodes first, then by host; cannot-judge after every failure
    groups.sort(key=lambda g: (g.status != FAILS, -len(g.hosts), hostlist.natural(g.hosts[0])))
    return tuple(groups)


def _outliers(records):
    out = []
    for fact in inputs.FACTS:
        values = collections.Counter(r.facts.get(fact) for r in records
                                     if r.facts.get(fact) is not None)
        if len(values) < 2:
            continue
        (majority, count), = values.most_common(1)
        if count * 2 <= sum(values.values()):
            majority = None  # no value is on more than half the nodes: all differ
        for value, _ in sorted(values.items(), key=lambda kv: (-kv[1], str(kv[0]))):
            if value != majority:
                hosts = tuple(sorted(r.host for r in records if r.facts.get(fact) == value))
                out.append(Outlier(fact, value, hosts, majority, count))
    return tuple(out)


def _builds(records):
    """Check answers of one requirement grouped by the build pip gives each node, most
    nodes first; () when they all get the same build (or asked different things)."""
    checks = [r for r in records if r.kind == "check" and r.facts.get("requirement")]
    if not checks or len({r.facts["requirement"] for r in checks}) > 1:
        return ()
    found = collections.defaultdict(list)
    for r in checks:
        found[(r.facts["asked"], r.facts.get("held_back"))].append(r.host)
    if len({build for build, _ in found}) < 2:
        return ()
    groups = [BuildGroup(build, tuple(sorted(hosts, key=hostlist.natural)), why)
              for (build, why), hosts in found.items()]
    groups.sort(key=lambda g: (-len(g.hosts), hostlist.natural(g.hosts[0])))
    return tuple(groups)


def _by_capability(records):
    """GPUs compared by compute capability where a node was planned by one (--gpu sm_90
    names no product): an H100 that nvidia-smi named and an sm_90 planned are the same
    GPU, not two. Otherwise by the product's name, which tells more (PCIe, SXM)."""
    planned = any(r.facts.get("gpu_sm") and r.facts.get("gpu_model") == r.facts["gpu_sm"]
                  for r in records)
    if not planned:
        return records
    return [dataclasses.replace(r, facts=dict(r.facts, gpu_model=r.facts.get("gpu_sm")))
            for r in records]


def summarize(paths):
    """A Summary of every answer under PATHS (files and directories)."""
    files, problems = inputs.files(paths)
    records = []
    for path in files:
        got = inputs.read(path)
        if isinstance(got, inputs.Problem):
            problems.append(got)
        else:
            records += got
    notes = []
    records = _by_capability(_one_per_host(records, notes))
    records.sort(key=lambda r: r.host)
    return Summary(tuple(paths), tuple(records), _groups(records), _outliers(records),
                   tuple(problems), _builds(records), tuple(notes))
