"""Node-side facts of the matrix: which driver branches run each GPU generation, the
lowest GPU each bundled cuDNN supports, the glibc each wheel tag needs, the compute
capability of GPU models by name, and the driver floors NVIDIA documents for one product
inside a branch (an HGX B200 needs 570.133.20, not just R570).

They live in their own TOML tables (``[[gpu]]``, ``[[gpu_model]]``, ``[[cudnn]]``,
``[[wheel_tag]]``, ``[[gpu_product]]``), each entry with its public ``source``; an entry (or field) that
could not be confirmed says so in ``unconfirmed``, and ``envcheck check`` turns a "no"
that rests on it into a warning rather than a failure. ``load.py`` calls ``parse`` for
each entry; the values are immutable, like the rest of the matrix.
"""

import dataclasses
import re
from typing import Optional, Tuple

from packaging.specifiers import SpecifierSet

from . import versions

KINDS = ("gpu", "gpu_model", "cudnn", "wheel_tag", "gpu_product")

_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
KEYS = {
    "gpu": {"generation", "archs", "first_branch", "last_branch", "source", "unconfirmed",
            "note"},
    "gpu_model": {"match", "sm", "machine", "source", "note"},
    "cudnn": {"cudnn", "min_sm", "source", "unconfirmed", "note"},
    "wheel_tag": {"tag", "glibc", "source", "note"},
    "gpu_product": {"product", "match", "min_driver", "source", "unconfirmed", "note"},
}


@dataclasses.dataclass(frozen=True)
class Generation:
    """A GPU generation and the NVIDIA driver branches that can run it."""

    name: str  # "Kepler"
    archs: Tuple[str, ...]  # every sm_XY of the generation
    first_branch: Optional[int]  # the first driver branch that runs it (570 for R570)
    last_branch: Optional[int]  # the last one (470 for Kepler); None while supported
    source: str
    where: object
    unconfirmed: Tuple[str, ...] = ()  # "first_branch", "last_branch"
    note: str = ""


@dataclasses.dataclass(frozen=True)
class GpuModel:
    """A GPU product name (as nvidia-smi prints it) and its compute capability."""

    pattern: re.Pattern
    sm: str
    source: str
    where: object
    machine: str = ""  # "aarch64": the GPU comes only on such nodes (Grace superchips)


@dataclasses.dataclass(frozen=True)
class CudnnFloor:
    """The lowest compute capability a range of cuDNN releases supports."""

    cudnn: SpecifierSet
    min_sm: str
    source: str
    where: object
    unconfirmed: bool = False
    note: str = ""


@dataclasses.dataclass(frozen=True)
class WheelTag:
    """A manylinux platform tag and the glibc it promises to need at most."""

    tag: str  # "manylinux_2_28"
    glibc: str
    source: str
    where: object


@dataclasses.dataclass(frozen=True)
class ProductFloor:
    """A GPU product whose driver floor NVIDIA documents inside a branch."""

    product: str  # "HGX B200"
    pattern: re.Pattern  # matched against the GPU's name as nvidia-smi prints it
    min_driver: str  # "570.133.20"
    source: str
    where: object
    unconfirmed: bool = False
    note: str = ""


def _strings(value):
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("expected a string or a list of strings, got %r" % (value,))


def _branch(errors, where, label, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 9999:
        errors.add(where, "%s must be a driver branch number like 470, got %r"
                   % (label, value))
        return None
    return value


def parse(errors, where, kind, e):
    """One entry of a fact table, or None after recording its errors."""
    for key in sorted(set(e) - KEYS[kind]):
        errors.add(where, "unknown key %r (allowed: %s)" % (key, ", ".join(sorted(KEYS[kind]))))
    if not e.get("source"):
        errors.add(where, "source is required (the public document this fact is from)")
    try:
        return {"gpu": _generation, "gpu_model": _model, "cudnn": _cudnn,
                "wheel_tag": _tag, "gpu_product": _product}[kind](errors, where, e)
    except ValueError as exc:
        errors.add(where, str(exc))
        return None


def _generation(errors, where, e):
    name = e.get("generation")
    if not isinstance(name, str) or not name:
        errors.add(where, "generation (a name like \"Kepler\") is required")
        return None
    archs = _strings(e.get("archs", []))
    bad = [a for a in archs if not _ARCH.match(a)]
    if bad or not archs:
        errors.add(where, "%s: archs must be a non-empty list of sm_XY, got %r"
                   % (name, list(archs)))
    first = _branch(errors, where, "%s: first_branch" % name, e.get("first_branch"))
    last = _branch(errors, where, "%s: last_branch" % name, e.get("last_branch"))
    if first and last and first > last:
        errors.add(where, "%s: first_branch %d is after last_branch %d" % (name, first, last))
    unconfirmed = _strings(e.get("unconfirmed", []))
    for field in unconfirmed:
        if field not in ("first_branch", "last_branch"):
            errors.add(where, "%s: unconfirmed lists %r (first_branch or last_branch)"
                       % (name, field))
    return Generation(name, archs, first, last, e.get("source", ""), where, unconfirmed,
                      e.get("note", ""))


def _model(errors, where, e):
    try:
        pattern = re.compile(e.get("match") or "", re.I)
    except re.error as exc:
        errors.add(where, "match %r is not a regular expression: %s" % (e.get("match"), exc))
        return None
    if not e.get("match"):
        errors.add(where, "match (a pattern of the GPU's name) is required")
        return None
    sm = e.get("sm")
    if not isinstance(sm, str) or not _ARCH.match(sm):
        errors.add(where, "sm must be sm_XY, got %r" % (sm,))
        return None
    machine = e.get("machine", "")
    if machine not in ("", "aarch64", "x86_64"):
        errors.add(where, "machine must be aarch64 or x86_64, got %r" % (machine,))
        return None
    return GpuModel(pattern, sm, e.get("source", ""), where, machine)


def _cudnn(errors, where, e):
    try:
        spec = versions.parse_specifier(e.get("cudnn"))
    except ValueError as exc:
        errors.add(where, "cudnn: %s" % exc)
        return None
    if not list(spec):
        errors.add(where, "cudnn (a range of cuDNN versions, e.g. \">=9.0,<9.11\") is required")
        return None
    sm = e.get("min_sm")
    if not isinstance(sm, str) or not _ARCH.match(sm):
        errors.add(where, "min_sm must be sm_XY, got %r" % (sm,))
        return None
    unconfirmed = e.get("unconfirmed", False)
    if not isinstance(unconfirmed, bool):
        errors.add(where, "unconfirmed must be true or false here")
        unconfirmed = True
    return CudnnFloor(spec, sm, e.get("source", ""), where, unconfirmed, e.get("note", ""))


def _tag(errors, where, e):
    tag = e.get("tag")
    if not isinstance(tag, str) or not re.match(r"^manylinux(1|2010|2014|_\d+_\d+)$", tag):
        errors.add(where, "tag must be a manylinux tag without the arch (manylinux2014, "
                   "manylinux_2_28), got %r" % (tag,))
        return None
    glibc = e.get("glibc")
    try:
        versions.driver_tuple(glibc)
    except ValueError:
        errors.add(where, "%s: glibc %r is not a dotted version" % (tag, glibc))
        return None
    return WheelTag(tag, glibc, e.get("source", ""), where)


def _product(errors, where, e):
    product = e.get("product")
    if not isinstance(product, str) or not product:
        errors.add(where, "product (a name like \"HGX B200\") is required")
        return None
    try:
        pattern = re.compile(e.get("match") or "", re.I)
    except re.error as exc:
        errors.add(where, "%s: match %r is not a regular expression: %s"
                   % (product, e.get("match"), exc))
        return None
    if not e.get("match"):
        errors.add(where, "%s: match (a pattern of the GPU's name) is required" % product)
        return None
    floor = e.get("min_driver")
    try:
        versions.driver_tuple(floor)
    except ValueError:
        errors.add(where, "%s: min_driver %r is not a driver version like 570.133.20"
                   % (product, floor))
        return None
    unconfirmed = e.get("unconfirmed", False)
    if not isinstance(unconfirmed, bool):
        errors.add(where, "%s: unconfirmed must be true or false here" % product)
        unconfirmed = True
    return ProductFloor(product, pattern, floor, e.get("source", ""), where, unconfirmed,
                        e.get("note", ""))


def cross_check(errors, parsed):
    """Two generations must not claim the same arch; two cuDNN floors must not overlap."""
    seen = {}
    for g in parsed["gpu"]:
        for a in g.archs:
            if a in seen:
                errors.add(g.where, "%s: %s is already in %s" % (g.name, a, seen[a]))
            seen[a] = g.name
    tags = {}
    for t in parsed["wheel_tag"]:
        if t.tag in tags:
            errors.add(t.where, "wheel tag %s is already defined at %s" % (t.tag, tags[t.tag]))
        tags[t.tag] = t.where


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """The five tables together, with the lookups ``envcheck check`` needs."""

    generations: Tuple[Generation, ...] = ()
    models: Tuple[GpuModel, ...] = ()
    cudnn: Tuple[CudnnFloor, ...] = ()
    wheel_tags: Tuple[WheelTag, ...] = ()
    products: Tuple[ProductFloor, ...] = ()

    def product_floor(self, name):
        """The documented driver floor of a GPU product by its name, or None."""
        if not name:
            return None
        return next((p for p in self.products if p.pattern.search(name)), None)

    def generation(self, sm):
        return next((g for g in self.generations if sm in g.archs), None)

    def cudnn_floor(self, cudnn_version):
        """The floor for a bundled cuDNN ("9.1.0.70"), or None when not covered."""
        if not cudnn_version:
            return None
        v = versions.parse_version(cudnn_version)
        return next((f for f in self.cudnn if f.cudnn.contains(v, prereleases=True)), None)

    def wheel_tag(self, tag):
        return next((t for t in self.wheel_tags if t.tag == tag), None)

    def model_sm(self, name):
        """(sm, GpuModel) for a GPU product name; the longest match wins, so
        'RTX A6000' is not read as 'A6'; (None, None) when no pattern matches."""
        best = None
        for m in self.models:
            found = m.pattern.search(name or "")
            if found and (best is None or len(found.group(0)) > best[0]):
                best = (len(found.group(0)), m)
        return (best[1].sm, best[1]) if best else (None, None)
