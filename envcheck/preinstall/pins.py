"""Which torch a user means: a requirement string, or the torch line of requirements.txt.

``torch==2.4.1+cu124`` names a build; ``torch==2.4.1`` the default PyPI build; a range
(``torch>=2.1,<2.5``), or a bare ``torch`` (any version), is resolved later
(``resolve.py``) as pip resolves it on the node.
A requirements file is read as pip reads it: ``-r`` and ``-c`` includes are followed
(iteratively, each file once, at most ``MAX_DEPTH`` deep), a torch line in a constraints
file narrows the range, environment markers are evaluated for the *node*
(``--python-version``, not the Python envcheck runs on), and ``--index-url`` /
``--extra-index-url`` say which indexes pip would read: ``download.pytorch.org/whl/cuXYZ``
serves that variant, any other URL is taken for PyPI or a mirror of it.
"""

import dataclasses
import os
import re
import urllib.parse
from typing import Optional, Tuple

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..matrix import versions
from ..core import limits
from ..core.errors import UsageError

_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:(?:nightly|test)/)?(cpu|cu\d{3}|rocm[\d.]+)")
PYPI = "pypi"  # an index name: PyPI, or any index that is not download.pytorch.org
MAX_DEPTH = 32  # -r/-c files nested deeper than this are an error, not a RecursionError


@dataclasses.dataclass(frozen=True)
class Pin:
    text: str  # as the user wrote it
    specifier: SpecifierSet
    variant: Optional[str] = None  # from a local tag or an index URL
    where: str = ""  # "requirements.txt:3" when read from a file
    # The indexes pip would read, in order: PYPI or a variant ("cu118"); () = PyPI only.
    indexes: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()  # how the file was read (constraints, skipped markers)

    @property
    def exact(self):
        """The pinned version string when the specifier is one == / ===, else None."""
        specs = list(self.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") \
                and not specs[0].version.endswith(".*"):
            return specs[0].version
        return None


def _shorten(text, limit=80):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def parse(text, where="", index_variant=None):
    label = where or "requirement"
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        # packaging's message points at the error on two more lines: keep its first
        raise UsageError("%s %r is not a requirement: %s (write e.g. torch==2.4.1+cu124)"
                         % (label, text, str(exc).splitlines()[0])) from None
    if req.name.lower() != "torch":
        raise UsageError("%s %r names %s, not torch" % (label, text, req.name))
    spec = req.specifier
    if req.url:
        spec = _spec_from_url(req.url, label)
    for s in spec:
        bad = None
        if s.operator == "===":
            bad = "arbitrary equality (===) names no release"
        elif len(s.version) > 64:
            bad = "a version of %d characters is not a torch release" % len(s.version)
        else:
            try:
                versions.parse_version(s.version.rstrip(".*"))
            except ValueError as exc:
                bad = str(exc)
        if bad:
            raise UsageError("%s %r: %s (write e.g. torch==2.4.1+cu124)"
                             % (label, _shorten(text), bad))
    variant = local_variant(spec)
    if variant and index_variant and variant != index_variant:
        raise UsageError("%s %r asks for +%s but its index URL serves %s"
                         % (label, text, variant, index_variant))
    return Pin(text, spec, variant or index_variant, where,
               (index_variant,) if index_variant else ())


def for_node(pin, environment):
    """A requirement given on the command line, with a marker that is false on the node
    (``torch==2.4.1; python_version < "3.12"`` for a 3.12 node): pip would not install
    torch at all there, so there is nothing to judge."""
    if not _marker_holds(pin.text, environment, "requirement"):
        raise UsageError("requirement %r: its marker is false on this node (Python %s, %s): "
                         "pip would not install torch here"
                         % (pin.text, environment.get("python_version"),
                            environment.get("sys_platform")))
    return pin


def index_of(url):
    """The index a URL names: a variant for download.pytorch.org/whl/X, else PYPI."""
    m = _INDEX.search(url)
    return m.group(1) if m else PYPI


def with_indexes(pin, index_url=None, extra_index_urls=(), whose="its index URLs serve"):
    """The Pin read from the indexes pip would use: ``--index-url`` replaces PyPI,
    each ``--extra-index-url`` is read besides it. A pin whose local tag names a
    variant none of them serves is an error (pip would find no such version)."""
    if not index_url and not extra_index_urls:
        return pin
    indexes = tuple(dict.fromkeys([index_of(index_url) if index_url else PYPI]
                                  + [index_of(u) for u in extra_index_urls]))
    tagged = local_variant(pin.specifier)
    if tagged and tagged not in indexes:
        served = ", ".join("PyPI" if i == PYPI else i for i in indexes)
        raise UsageError("%s %r asks for +%s but %s %s"
                         % (pin.where or "requirement", pin.text, tagged, whose, served))
    only = indexes[0] if len(indexes) == 1 and indexes[0] != PYPI else None
    variant = tagged or only
    return dataclasses.replace(pin, variant=variant, indexes=indexes)


def check_index_url(url, label):
    """An index URL as pip takes one: http(s)://HOST/..., file://..., or a local directory
    laid out as a simple index; UsageError naming what was expected otherwise."""
    parts = urllib.parse.urlsplit(url)
    if (parts.scheme in ("http", "https") and parts.netloc) or parts.scheme == "file" \
            or (not parts.scheme and os.path.isdir(url)):
        return
    raise UsageError("%s %r is not an index URL: give one like "
                     "https://download.pytorch.org/whl/cu126 (or https://pypi.org/simple, "
                     "or a local directory laid out as a simple index)" % (label, url))


def _spec_from_url(url, label):
    name = urllib.parse.unquote(url.rsplit("/", 1)[-1].split("#")[0])
    try:
        _, version, _, _ = parse_wheel_filename(name)
    except InvalidWheelFilename:
        raise UsageError("%s: %s is not a torch wheel URL" % (label, url)) from None
    return SpecifierSet("==%s" % version)


def _logical_lines(path):
    # utf-8-sig: a file saved by an editor that writes a BOM must not hide its first line.
    raw = limits.read_input(path, 16 << 20).decode("utf-8-sig").splitlines()
    buf, start = "", None
    for n, line in enumerate(raw, 1):
        if start is None:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        yield start, buf + line
        buf, start = "", None
    if buf:
        yield start, buf


_OPTION = re.compile(r"^(-i|--index-url|--extra-index-url)(?:\s+|=)(\S+)")
_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s+|=)?(\S+)")


@dataclasses.dataclass
class _Frame:
    path: str
    lines: object  # iterator of (line number, logical line)
    depth: int
    constraint: bool  # a -c file, or one included by it: its pins only narrow


@dataclasses.dataclass
class Read:
    """What a requirements file (with its includes) says about torch."""

    requirements: list  # [Pin] from requirement lines whose marker holds on the node
    constraints: list  # [Pin] from constraint files
    index_url: Optional[str] = None
    extra_index_urls: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)  # "file:3: line (marker)"


def _open(path, depth, constraint, via, seen):
    real = os.path.realpath(path)
    if real in seen:
        return None  # read once, as a cycle or a diamond of includes would repeat it
    seen.add(real)
    label = ("-c %s" if constraint else "-r %s") % path
    if via:
        label += " (included from %s)" % via
    if "://" in path:
        raise UsageError("%s: envcheck reads local files only; download it first" % label)
    try:
        lines = list(_logical_lines(path))
    except FileNotFoundError:
        raise UsageError("%s: no such file" % label) from None
    except (OSError, UnicodeDecodeError, limits.InputError) as exc:
        raise UsageError("%s: cannot read it (%s)" % (label, exc)) from None
    return _Frame(path, iter(lines), depth, constraint)


def read(path, environment=None):
    """Read a requirements file and its -r/-c includes, depth-first in file order as pip
    does, without recursion: a chain of includes deeper than MAX_DEPTH is an error.
    ``environment``: the node's marker variables (packaging.markers); None: this
    interpreter's."""
    seen = set()
    out = Read([], [])
    stack = [_open(path, 0, False, None, seen)]
    while stack:
        frame = stack[-1]
        got = next(frame.lines, None)
        if got is None:
            stack.pop()
            continue
        n, line = got
        where = "%s:%d" % (frame.path, n)
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        opt = _OPTION.match(line)
        if opt:
            check_index_url(opt.group(2), "%s: %s" % (where, opt.group(1)))
            if opt.group(1) == "--extra-index-url":
                out.extra_index_urls.append(opt.group(2))
            else:
                out.index_url = opt.group(2)  # the last one read wins, as in pip
            continue
        inc = _INCLUDE.match(line)
        if inc:
            if frame.depth + 1 > MAX_DEPTH:
                raise UsageError("%s: %s %s nests requirements files more than %d deep: "
                                 "flatten them" % (where, inc.group(1), inc.group(2),
                                                   MAX_DEPTH))
            target = inc.group(2) if "://" in inc.group(2) else \
                os.path.join(os.path.dirname(frame.path), inc.group(2))
            child = _open(target, frame.depth + 1,
                          frame.constraint or inc.group(1) in ("-c", "--constraint"),
                          where, seen)
            if child is not None:
                stack.append(child)
            continue
        name = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if line.startswith("-") or not name or name.group(1).lower() != "torch":
            continue  # other pip options (-f, --hash ...) and other packages
        # pip-compile writes per-requirement options (--hash=sha256:...) after the pin.
        line = re.split(r"\s+--?[A-Za-z]", line, maxsplit=1)[0].strip()
        if not _marker_holds(line, environment, where):
            out.skipped.append("%s: %s" % (where, line))
            continue
        (out.constraints if frame.constraint else out.requirements).append(
            parse(line, where))
    return out


def _marker_holds(line, environment, where):
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return True  # parse() reports it with its line
    if req.marker is None:
        return True
    try:
        return req.marker.evaluate(environment=environment)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName) as exc:
        raise UsageError("%s: marker %r cannot be evaluated: %s"
                         % (where, str(req.marker), exc)) from None


def from_file(path, environment=None, index_url=None, extra_index_urls=()):
    """The one torch Pin in a requirements file, its range narrowed by the torch lines
    of its constraints files, read from the indexes the file (or the command line)
    names."""
    got = read(path, environment)
    pins = got.requirements
    if not pins:
        if got.skipped:
            raise UsageError("-r %s: no torch requirement applies to this node (its "
                             "marker is false: %s)" % (path, "; ".join(got.skipped)))
        raise UsageError("-r %s: no torch requirement in it" % path)
    if len(pins) > 1:
        raise UsageError("-r %s: torch is required more than once (%s)"
                         % (path, ", ".join(p.where for p in pins)))
    pin = pins[0]
    notes = []
    if got.skipped:
        notes.append("not for this node (marker false): %s" % "; ".join(got.skipped))
    spec = pin.specifier
    for c in got.constraints:
        spec = spec & c.specifier
        notes.append("constrained by %s: %s" % (c.where, c.text))
    pin = dataclasses.replace(pin, specifier=spec, variant=local_variant(spec),
                              notes=pin.notes + tuple(notes))
    index = index_url or got.index_url
    extras = list(got.extra_index_urls) + list(extra_index_urls)
    return with_indexes(pin, index, extras, whose="the file's index URL serves")


def local_variant(spec):
    """The variant a range's local tag names (``==2.4.1+cu124``: cu124), or None."""
    for s in spec:
        try:
            tagged = versions.local_variant(s.version.rstrip(".*"))
        except ValueError:
            tagged = None
        if tagged:
            return tagged
    return None
