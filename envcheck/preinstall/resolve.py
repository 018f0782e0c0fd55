"""Which torch wheel pip would install on a node, for a pin or a range.

pip does not take the newest release in a range and then find out whether it fits: it
lists every version the indexes offer, drops those with no wheel whose tags the node
accepts (Python and ABI, free-threaded included; the manylinux tag against the node's
glibc; the CPU arch), and installs the newest of the rest (pypa/pip#10784 is what users
see when it silently goes back to an old release). This module does the same over the
matrix: each patch release of each index is a candidate (PyPI serves the release's
default build as plain ``2.8.0``; ``download.pytorch.org/whl/cu126`` serves
``2.8.0+cu126``), its wheel tags come from the matrix (per patch where a patch differs,
``releases.toml`` ``per_patch``), and the node's accepted tags come from
``packaging.tags`` as pip computes them. What it skips, and why, is said in pip-like
words. Pure functions: nothing here reads the node or prints.
"""

import dataclasses
import functools
import re
from typing import Optional, Tuple

from packaging import tags as ptags
from packaging.version import Version

from ..matrix import versions
from .pins import PYPI

PYTHON, GLIBC = "python", "glibc"  # why a candidate is skipped


@dataclasses.dataclass(frozen=True)
class Candidate:
    version: Version  # as the index serves it: 2.8.0 (PyPI) or 2.8.0+cu126
    patch: str  # "2.8.0"
    variant: str  # "cu128"
    index: str  # PYPI or the variant's index
    release: object  # matrix Release
    default: bool  # PyPI's build (pip install torch==X)


@dataclasses.dataclass(frozen=True)
class Skip:
    """Candidates passed over for the same reason, newest first."""

    versions: Tuple[str, ...]
    why: str  # PYTHON or GLIBC
    message: str  # "their wheels need glibc ≥ 2.28 (manylinux_2_28), this node has 2.17"
    short: str  # "glibc 2.17 < 2.28"

    @property
    def text(self):
        span = self.versions[0] if len(self.versions) == 1 else "%s–%s (%d versions)" % (
            self.versions[-1], self.versions[0], len(self.versions))
        return "%s skipped: %s" % (span, self.message)


@dataclasses.dataclass(frozen=True)
class Resolution:
    chosen: Optional[Candidate]  # what pip installs; None when nothing fits
    newest: Optional[Candidate]  # the newest candidate in range, fitting or not
    skipped: Tuple[Skip, ...]  # candidates newer than the chosen one, grouped
    indexes: Tuple[str, ...]
    judged_tags: bool  # False when the matrix cannot say which wheels the node takes

    def to_dict(self):
        def cand(c):
            return None if c is None else {"version": str(c.version), "build": "%s+%s" % (
                c.patch, c.variant), "index": c.index}
        return {"chosen": cand(self.chosen), "newest_in_range": cand(self.newest),
                "indexes": list(self.indexes), "judged_tags": self.judged_tags,
                "skipped": [{"versions": list(s.versions), "why": s.why,
                             "message": s.message, "short": s.short}
                            for s in self.skipped]}


def _abi(python):
    """'3.11' → ('cp311', (3, 11)); '3.13t' → 'cp313t'; '3.7' → 'cp37m' (before 3.8)."""
    m = re.match(r"^(\d+)\.(\d+)(t?)$", python)
    major, minor, free = int(m.group(1)), int(m.group(2)), m.group(3)
    suffix = "t" if free else ("m" if (major, minor) < (3, 8) else "")
    return "cp%d%d%s" % (major, minor, suffix), (major, minor)


def abi_tag(python):
    """The ABI tag of a node's wheels: 'cp311', 'cp313t' (free-threaded), 'cp37m'."""
    return _abi(python)[0]


def node_platforms(glibc, machine="x86_64"):
    """The platform tags pip accepts on a Linux node with this glibc, most specific
    first: manylinux_2_G … manylinux_2_5 and their legacy aliases (PEP 600), then
    linux_ARCH. () without glibc (musl): no manylinux wheel installs there."""
    if not glibc:
        return ("linux_%s" % machine,)
    major, minor = versions.driver_tuple(glibc)[:2]
    out = []
    for m in range(minor, 4, -1) if major == 2 else ():
        out.append("manylinux_2_%d_%s" % (m, machine))
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}.get(m)
        if legacy:
            out.append("%s_%s" % (legacy, machine))
    return tuple(out) + ("linux_%s" % machine,)


@functools.lru_cache(maxsize=16)
def node_tags(python, glibc, machine="x86_64"):
    """Every wheel tag pip accepts for this interpreter (packaging.tags.cpython_tags, as
    pip's --python-version/--abi/--platform compute them)."""
    abi, version = _abi(python)
    return frozenset(ptags.cpython_tags(version, abis=[abi],
                                        platforms=node_platforms(glibc, machine)))


def wheel_tags(release, patch, variant, machine="x86_64"):
    """The tags of one build's wheels: one per Python of that patch, on its platform."""
    platform = "%s_%s" % (wheel_platform(release, variant), machine)
    out = []
    for py in release.python_for(patch):
        abi, (major, minor) = _abi(py)
        out.append(ptags.Tag("cp%d%d" % (major, minor), abi, platform))
    return tuple(out)


def wheel_platform(release, variant):
    """'manylinux_2_28', 'manylinux1': the platform tag of a build's wheels (a variant
    built on another image says so with its own glibc, as 2.6 cu126 does)."""
    if variant is not None and variant.glibc and variant.glibc != release.glibc:
        return "manylinux_%s_%s" % tuple(variant.glibc.split(".")[:2])
    m = re.search(r"manylinux(1|2010|2014|_\d+_\d+)", release.manylinux or "")
    return m.group(0) if m else "manylinux_%s_%s" % tuple(release.glibc.split(".")[:2])


def candidates(matrix, spec, indexes):
    """Every version the indexes serve that the range admits, newest first (pip's
    order: a local version sorts above its public one, so 2.4.1+cu118 from an extra
    index beats PyPI's 2.4.1)."""
    out = []
    for index in indexes or (PYPI,):
        for release in matrix.releases:
            name = release.default_variant if index == PYPI else index
            variant = release.variant(name)
            if variant is None:
                continue  # that index has no build of this release
            for patch in release.patches:
                version = Version(patch if index == PYPI else "%s+%s" % (patch, name))
                if spec.contains(version, prereleases=False):
                    out.append(Candidate(version, patch, name, index, release,
                                         index == PYPI))
    out.sort(key=lambda c: c.version, reverse=True)
    return out


def _why_not(c, node, accepted):
    """(why, message, short) when no wheel of c installs on the node; None when one does."""
    wheels = wheel_tags(c.release, c.patch, c.release.variant(c.variant), node.machine)
    if any(t in accepted for t in wheels):
        return None
    pythons = c.release.python_for(c.patch)
    if node.python not in pythons:
        has = _span([p for p in pythons if not p.endswith("t")]) + "".join(
            ", " + p for p in pythons if p.endswith("t"))
        return (PYTHON, "no wheel for Python %s (%s)" % (node.python, has),
                "no Python %s wheel" % node.python)
    platform = wheel_platform(c.release, c.release.variant(c.variant))
    if not node.glibc:
        return (GLIBC, "their wheels are %s; this node has no glibc (musl?)" % platform,
                "no glibc")
    need = c.release.glibc_for(c.release.variant(c.variant))
    tag_glibc = re.match(r"manylinux_(\d+)_(\d+)", platform)
    need = "%s.%s" % tag_glibc.groups() if tag_glibc else need
    return (GLIBC, "their wheels need glibc ≥ %s (%s), this node has %s"
            % (need, platform, node.glibc), "glibc %s < %s" % (node.glibc, need))


def _span(items):
    items = list(items)
    return "%s–%s" % (items[0], items[-1]) if len(items) > 2 else ", ".join(items)


def resolve(matrix, spec, indexes, node):
    """What pip installs for ``spec`` from ``indexes`` on ``node``: a Resolution, or
    None when no candidate is in range at all (the caller says what the matrix knows)."""
    found = candidates(matrix, spec, indexes)
    if not found:
        return None
    if not node.is_linux_x86_64:
        # The matrix holds Linux x86_64 wheels only: which ones another platform takes
        # is not known, so the newest in range is judged (and the answer says so).
        return Resolution(found[0], found[0], (), tuple(indexes), False)
    accepted = node_tags(node.python, node.glibc, node.machine)
    groups = []
    for c in found:
        why = _why_not(c, node, accepted)
        if why is None:
            return Resolution(c, found[0], _group(groups, node.python), tuple(indexes), True)
        groups.append((c, why))
    return Resolution(None, found[0], _group(groups, node.python), tuple(indexes), True)


def _group(skipped, python):
    """Consecutive candidates skipped for the same reason, as one Skip. Releases whose
    Python lists differ but all lack the node's are one group ("no wheel for Python
    3.6"); the list is kept where the whole group shares it."""
    out = []
    for c, (why, message, short) in skipped:
        if out and out[-1][1] == why and out[-1][3] == short:
            out[-1][0].append(str(c.version))
            out[-1][2].add(message)
        else:
            out.append(([str(c.version)], why, {message}, short))
    groups = []
    for found, why, messages, short in out:
        message = messages.pop() if len(messages) == 1 else \
            "no wheel for Python %s" % python
        if len(found) == 1:
            message = message.replace("their wheels", "its wheels")
        groups.append(Skip(tuple(found), why, message, short))
    return tuple(groups)
