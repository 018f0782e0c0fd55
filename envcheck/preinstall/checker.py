"""``envcheck check`` as a library call: options in, ``Result`` out, nothing printed."""

import dataclasses
import datetime
import time
from typing import Optional

from .. import __version__
from ..matrix import load as matrix_load
from . import evaluate, known, node as node_mod, pins
from ..core.errors import UsageError
from ..core.host import host_name
from ..core.outcomes import ExitCode


@dataclasses.dataclass
class Result:
    requirement: Optional[str]
    node: node_mod.Node
    answer: Optional[evaluate.Answer]
    alternatives: list
    suggestions: Optional[list]
    matrix_files: list
    cpu_instead: Optional[evaluate.Build]  # no GPU here: install this CPU build instead
    python_releases: list  # when this Python has no wheel: the releases that have one
    exit_code: ExitCode
    seconds: float
    envcheck_version: str = __version__
    # the node's name in a cluster summary (ENVCHECK_HOST overrides it, as for the ranks)
    host: str = dataclasses.field(default_factory=host_name)
    created: str = dataclasses.field(default_factory=lambda: datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec="seconds"))
    # how pip's choice was made: candidates skipped and why (resolve.Resolution)
    resolution: Optional[object] = None


def run(requirement=None, requirements_file=None, cuda=None, driver=None, gpus=(),
        python_version=None, suggest=False, matrix_dirs=(), glibc=None, index_url=None,
        extra_index_urls=(), arch=None):
    started = time.monotonic()
    if requirement and requirements_file:
        raise UsageError("give a requirement or -r FILE, not both")
    if not (requirement or requirements_file or suggest):
        raise UsageError("say what to check: a requirement (torch==2.4.1+cu124), "
                         "-r requirements.txt, or --suggest")
    matrix = matrix_load.load(matrix_dirs)
    # Python, OS and glibc first: markers and pip's choice of wheel depend on them alone.
    machine, machine_note = known.machine_for(matrix, arch, gpus)
    host = node_mod.host(python_version, glibc, machine)
    _check_planned(matrix, host, python_version, driver, gpus, index_url, extra_index_urls)
    pin = None
    if requirement:
        pin = pins.with_indexes(pins.for_node(pins.parse(requirement),
                                              node_mod.marker_environment(host)),
                                index_url, extra_index_urls)
    elif requirements_file:
        pin = pins.from_file(requirements_file, node_mod.marker_environment(host),
                             index_url, extra_index_urls)
    elif index_url or extra_index_urls:
        raise UsageError("--index-url / --extra-index-url need a requirement to apply to")
    resolution = None
    if pin is not None:
        # Resolve before touching nvidia-smi: an unknown version is the user's to fix.
        release, build, notes, resolution = evaluate.pick(matrix, pin, host, cuda)
    elif cuda is not None:
        raise UsageError("--cuda needs a requirement to apply to")
    node = node_mod.read(python_version, driver, gpus, glibc=glibc,
                         resolve_name=lambda name: matrix.node.model_sm(name)[0],
                         machine=machine, machine_note=machine_note)
    answer, alternatives, suggestions, cpu_instead, for_python = None, [], None, None, []
    code = ExitCode.OK
    if pin is not None:
        notes = list(pin.notes) + notes
        if not list(pin.specifier):
            notes.append("%s pins no version: after the next torch release, or on "
                         "another node, pip installs another build; pin it (torch==%s)"
                         % (pin.text, build.torch))
        if pin.where:
            notes = ["%s: %s" % (pin.where, pin.text)] + notes
        answer = evaluate.evaluate(matrix, release, build, node, notes)
        if answer.cannot_judge:
            code = ExitCode.CANNOT_JUDGE
        if answer.works:
            cpu_instead = evaluate.cpu_build(release, build, node)
        if any(c.id == "wheel" and c.status == evaluate.FAIL and "python" in c.short.lower()
               for c in answer.criteria):
            for_python = evaluate.python_releases(matrix, node.python)
        if not answer.works:
            code = ExitCode.FAILED
            alternatives = evaluate.working_builds(matrix, release, build.torch, node,
                                                   exclude=build.variant)
    if suggest:
        suggestions = evaluate.suggest(matrix, node)
        if pin is None and not suggestions:
            code = ExitCode.FAILED
    return Result(pin.text if pin else None, node, answer, alternatives, suggestions,
                  [f.path for f in matrix.files if not f.builtin], cpu_instead, for_python,
                  code, round(time.monotonic() - started, 3), resolution=resolution)


def _check_planned(matrix, host, python_version, driver, gpus, index_url, extra_index_urls):
    """The planning flags name what exists (known.py), the index URLs are URLs: anything
    else is a typo to fix, one line and exit 2, before any answer is made of it."""
    if python_version:
        known.check_python(matrix, host.python, python_version)
    if driver:
        known.check_driver(matrix, driver)
    for text in gpus:
        try:
            sm = node_mod.parse_gpu(text)
        except UsageError:
            continue  # a GPU's name: the matrix's name table resolves it, or says no
        known.check_gpu(matrix, sm, text)
    if index_url:
        pins.check_index_url(index_url, "--index-url")
    for url in extra_index_urls:
        pins.check_index_url(url, "--extra-index-url")
