"""Failure signatures: how a known failure reads in a job's log, with its cause, fix and
public source (``[[signature]]`` in the matrix, ``data/signatures/*.toml``).

``envcheck explain`` matches them against a failed job's log; ``envcheck run`` matches
them against its own failing checks (``explain.diagnose``). The advice is written once:
either here (``advice``) or, for a failure a probe reproduces, taken from that check's
expected failure (``advice_from = "serialization.pickle_default_group"``), so that the
run and the explanation never say two different things.

The log scan looks only at lines that hold one of ``SCAN_WORDS`` (a C-speed search over
the raw bytes, which is what makes a 2 GB log take seconds): every pattern must contain
one of them literally, and validation says so when one does not.
"""

import dataclasses
import re
from typing import Optional, Tuple

from ..probes import catalog

# The words a line must hold to be looked at (case-sensitive; chosen to start with
# letters that are rare in a training log's progress lines, which keeps the scan fast).
SCAN_WORDS = ("Error", "ERROR", "NCCL", "NET/IB", "CUDA", "NVIDIA", "Nvidia", "Driver",
              "THCudaCheck", "Exception", "Failed", "SIG", "Weights", "DDP", "NumPy", "Numpy",
              "Duplicate",
              "Bootstrap", "AF_INET", "Cannot", "Expected", "PyTorch", "Python version",
              "WARN", "Watchdog",
              # issue #34: rendezvous and the store, hosts, GPUs, launchers' summaries (each
              # starts with a capital: lower-case first letters are everywhere in a log;
              # "GPU has fallen" cost the scan 20% on progress lines that print "GiB")
              "EADDRINUSE", "Address already", "Name or service", "Temporary failure",
              "EAI_NONAME", "The client socket", "Rendezvous", "TCP client", "SocketImpl",
              "Socket Timeout", "Detected ", "ECC", "Xid", "NVRM",
              "DataLoader", "Connection closed", "Connection reset", "Root Cause",
              # NCCL's own WARN texts, as torch repeats them after "Last error:" on a
              # line of their own (issue #34, from NCCL's source)
              "Cuda failure", "Connect to",
              # older gloo's "connect [ADDR]:PORT: Connection refused" (pair.cc)
              "Connection refused",
              # Open MPI's MPI_Init failures (mpi4py imported by Lightning, an H200 node)
              "MPI_INIT",
              # phase B of issue #34, from the sources: NCCL's interface lines, the name
              # lookup's EAI_NODATA, elastic's newer log format, the OOM killer (kernel,
              # Slurm's "Detected N oom_kill event", Kubernetes), nvidia-smi's "GPU is
              # lost", NCCL's P2P-over-NVLink warning (a word with a first letter already
              # here where one will do: each new first letter costs the scan a branch)
              "NET/Socket", "No address associated", "(exitcode: -", "Out of memory",
              "Memory cgroup out of memory", "OOMKilled", "Reboot the system to recover",
              "P2P is disabled",
              # phase C of issue #34: torch's loopback fallback (a TORCH_WARN, "Warning: "
              # or Python's "UserWarning: "), and the rank argument a launcher passes
              # (argparse's "unrecognized arguments: --local-rank=N": every word of that
              # line starts lower-case; "-" costs the scan less than "u" would); the
              # other phase C wordings hold a word already here ("Error", "CUDA", ...)
              "Warning: Unable to resolve", "--local",
              # phase D of issue #34: DeepSpeed's launcher's "exits with return code =
              # -9" on a line of its own and torchrun's summary "exitcode  : -9" ("-9"
              # where "-" is here already); bash's "Killed", kubectl's "Exit Code: 137"
              # and sacct's OUT_OF_MEMORY (K and O: rare first letters); MPICH's Hydra
              # errors (HYD...), srun's "Out Of Memory", Open MPI's "OMPI was not built";
              # PMI's "PMI2_Init failed"
              "-9", "Killed", "Exit Code", "OUT_OF_MEMORY", "Out Of Memory", "HYD",
              "OMPI was not built", "PMI",
              # phase E of issue #34: Slurm's time limit and preemption ('*** JOB N ON
              # HOST CANCELLED AT T DUE TO TIME LIMIT ***': D is a first letter here
              # already); NCCL's 'Error: network X not found', Lightning's
              # MisconfigurationException and the CUDA texts hold words already here
              "DUE TO TIME LIMIT", "DUE TO PREEMPTION",
              # phase F of issue #34: Lightning 2.1.0-2.1.2's source line in a traceback
              # ('unique_hosts = sorted(set(all_hostnames))'), and a traceback's source
              # line reading a launcher's variable from os.environ ('os.environ["RANK"]',
              # with its closing quote and bracket, so that a line merely naming RANK is
              # not read): "(", "R" and "W" are first letters here already (a quote as
              # one cost the scan twice the CPU on JSON and HF Trainer metrics lines);
              # NCCL's shm and NVLS warnings, torch's DDP and rendezvous errors hold
              # words already here
              "(all_hostnames", "RANK\"]", "RANK']", "WORLD_SIZE\"]", "WORLD_SIZE']",
              # phase G of issue #34: a bus error as each crash handler and parent prints
              # it (UCX's "Caught signal 7 (Bus error: ...)", faulthandler's "Fatal Python
              # error: Bus error", bash's "Bus error (core dumped)", Open MPI, srun, gdb,
              # Hydra: strsignal's words; B is a first letter here already); the launcher's
              # rank argument refused by absl's flags ("FATAL Flags parsing error: Unknown
              # command line flag 'local_rank'") and Hydra ("Could not override
              # 'local_rank'."), F and C first letters already; the other parsers' words
              # hold "--local" (click, fire, jsonargparse, OmegaConf) or "Error"
              # (hyperpyyaml's KeyError)
              "Bus error", "FATAL Flags", "Could not override 'local",
              # phase H of issue #34: DDP's lists of the parameters that got no gradient
              # (reducer.cpp: "Parameters which did not receive grad for rank N: ...",
              # "Parameter indices which ...": P is a first letter here already); torchrun's
              # own options, as argparse's all-lower-case refusal names them ("torchrun:
              # error: unrecognized arguments: --nproc-per-node=1"), each under "-", a
              # first letter already (as "--local" is); FSDP's refusal holds "Error"
              # (the option's own name, both spellings where a training script's
              # arguments share its first word: --max_steps, --logging_steps, --run_name)
              "Parameters which", "Parameter indices", "--nproc", "--nnodes", "--node-rank",
              "--node_rank", "--master", "--rdzv", "--standalone", "--max-restarts",
              "--max_restarts", "--monitor", "--start-method", "--start_method", "--role",
              "--module", "--no-python", "--no_python", "--run-path", "--run_path",
              "--log-dir", "--log_dir", "--logs-specs", "--logs_specs", "--log-line",
              "--log_line", "--redirects", "--tee", "--use-env", "--use_env", "--event",
              "--numa", "--duplicate", "--signals", "--virtual", "--shutdown",
              "--print-completion", "--print_completion",
              # phase K of issue #34: FSDP2's refusal of a deepcopy (fully_shard's
              # __deepcopy__), which a framework may log with none of the words above
              # ("Failed to save EMA weights: FSDP does not ...": F is a first letter
              # here already); the rest of phase K's texts hold "Error" or "Cuda failure"
              "FSDP does not support deepcopy",
              # phase M: accelerate's refusals of the installed torch, printed without an
              # exception's type ('Native multi-GPU training requires pytorch>=1.9.1',
              # accelerate 0.16's launch; N and M are first letters here already)
              "Native multi-GPU training", "Multi-node training",
              # phase N: DeepSpeed's multi-node launcher's command line ('cmd = pdsh -S -f
              # 1024 -w HOSTS export ...', PDSH_MAX_FAN_OUT: its exports cut short by a
              # paste hold no other word; "-" is a first letter here already), and sbatch's
              # refusal by the controller ('Batch job submission failed: Invalid generic
              # resource (gres) specification': B is a first letter already); the other
              # phase N texts hold "Error", "NCCL" or "Failed"
              "-f 1024 -w", "Batch job submission failed",
              # phase S: torch's warning that only reentrant activation checkpointing
              # prints (torch/utils/checkpoint.py check_backward_validity, called by
              # CheckpointFunction.forward: 'None of the inputs have requires_grad=True.
              # Gradients will be None'; N is a first letter here already)
              "None of the inputs have requires_grad",
              # phase V: nvcc's refusal of an architecture its CUDA toolkit does not know
              # ('nvcc fatal   : Unsupported gpu architecture 'compute_89'', "Value
              # 'sm_89' is not defined for option 'gpu-architecture'"): every other word
              # of those lines starts lower-case; U and V are new first letters, rare
              # capitals in a training log's progress lines (bench/explain.md)
              "Unsupported gpu architecture", "Value 'sm_", "Value 'compute_",
              # phase X: torch's env:// rendezvous refusing a launcher's variable, as a
              # traceback's source line shows it ('raise _env_error("MASTER_ADDR")',
              # '_get_env_or_raise("RANK")'): R, W and M are first letters here already
              "RANK\"", "WORLD_SIZE\"", "MASTER_ADDR\"", "MASTER_PORT\"",
              # phase Y: torch elastic's agent on the signal it got, its number as
              # Python 3.11 formats it ('Received 15 death signal'; 'Signals.SIGTERM',
              # 'closing signal SIGHUP' and the SignalException hold "SIG" or
              # "Exception"): R is a first letter here already
              "Received 1 death", "Received 15 death", "Received 2 death",
              "Received 3 death",
              # phase AA of issue #34: Slurm's step that did not launch ('srun: StepId=N.0
              # aborted before step completely launched.') and slurmstepd's exec of a
              # command the node lacks ('execve(): torchrun: No such file or directory'):
              # S and N are first letters already
              "StepId=", "No such file or directory")
# caught_by may name the pre-install command instead of a check of envcheck run
PREINSTALL = "envcheck check"

SIGNATURE_KEYS = {"id", "cause", "match", "advice", "advice_from", "framework_advice",
                  "source", "caught_by", "gpu", "symptom", "differ", "needs", "explains",
                  "weak_match", "weak_needs", "alone_match", "alone_cause", "alone_unless", "note",
                  "differ_match", "traceback", "line_match"}
# The rules a signature's ``traceback`` may name: its exception line is the cause only
# where the traceback's frames say so (explain/structure.py TRACEBACK_RULES holds them):
# "command_lookup", a bare command name subprocess did not find on PATH;
# "two_packages", an installed package calling another's API in a shape the installed
# release of it does not have (issue #34, phase K); "launcher_summary", a launcher's
# CalledProcessError for a rank it started, raised in the launcher's own frame; "fork",
# an error raised where CPython forks (multiprocessing, subprocess); "rendezvous_url",
# urllib's refusal of a URL's port where torch's rendezvous parsed it (phase L);
# "torch_keyword", a torch API called, by its qualified name, with a keyword a later torch
# release added; "fsdp_intra_node", torch's refusal of a subgroup larger than the world
# where FSDP's hybrid sharding asked for one of a node's GPUs (phase M); "own_module", an
# installed package's module importing a module of its own package that is not installed
# (phase N); "missing_module", an import of a top-level module this interpreter does not
# find (phase AC)
TRACEBACK_RULES = ("command_lookup", "two_packages", "launcher_summary", "fork",
                   "rendezvous_url", "torch_keyword", "fsdp_intra_node", "own_module",
                   "missing_module")

# A cause read from lines a working job prints too, where the log shows nothing else, is a
# guess: its wording must say so (issue #34, phase D)
CONFIDENCE_WORDS = ("likely", "possibly", "probably")

_ID = re.compile(r"^[a-z0-9_-]+\.[a-z0-9_.-]+$")



def _first(patterns, text):
    """The first match of any of ``patterns`` in ``text``, or None."""
    for p in patterns:
        m = p.search(text)
        if m:
            return m
    return None

@dataclasses.dataclass(frozen=True)
class Signature:
    id: str  # "nccl.shm_full"
    cause: str  # one line: what went wrong
    patterns: Tuple[re.Pattern, ...]  # any of them, searched in one line of the log
    source: str  # the public source: an issue, a PR, the library's own code
    where: object  # model.Where
    advice: Optional[str] = None  # resolved: its own, or its advice_from check's
    advice_from: Optional[str] = None  # the check whose expected failure holds the advice
    framework_advice: Tuple[Tuple[str, str], ...] = ()
    caught_by: Tuple[str, ...] = ()  # the envcheck run checks that would have caught it
    gpu: bool = False  # seen on GPUs only: matched on real texts, unverified on hardware
    symptom: bool = False  # usually the consequence of another failure (a timeout...)
    differ: bool = False  # fires when the pattern's first group differs between ranks
    needs: Tuple[str, ...] = ()  # fires only where one of these signatures fired too
    # signatures whose findings this one explains: where both fire on the same ranks (or
    # where the log does not say whose lines they are), this one is the cause and those
    # its consequences, whichever the log shows first (a name that does not resolve, then
    # the connect that failed for want of it)
    explains: Tuple[str, ...] = ()
    # patterns that name this cause only where one of ``weak_needs`` fired too: a warning
    # that a working job prints as well (torch's fallback to the loopback address when
    # the host name does not resolve, harmless on one node), read as a conditional cause
    weak: Tuple[re.Pattern, ...] = ()
    weak_needs: Tuple[str, ...] = ()
    # patterns that name this cause only where the log shows nothing else (no other
    # finding, no symptom, no exception line): NCCL's INFO trace of a failed socket, or
    # its init lines and then nothing (a hang), a traceback's source line whose exception
    # line is not in the log. Such a finding says
    # ``alone_cause``, worded with a confidence word, not ``cause``; a ``needs``
    # signature whose needs did not fire is read the same way where it has one
    alone: Tuple[re.Pattern, ...] = ()
    alone_cause: str = ""
    # patterns of lines that show the job went on past what the ``alone_match`` lines
    # would make a hang (NCCL's '- Destroy COMPLETE' of a communicator): where one follows
    # the last of them in each file that has them, the guess is not made
    alone_unless: Tuple[re.Pattern, ...] = ()
    # patterns that name this cause where two ranks' lines differ in their group
    # ``value`` (lines whose rank the log does not say are not compared; with a group
    # ``scope``, only lines of the same scope are: one process group's sequence numbers)
    differ_patterns: Tuple[re.Pattern, ...] = ()
    # a rule of TRACEBACK_RULES: the ``match`` patterns are read only on an exception line
    # whose traceback's frames the rule accepts (never line by line)
    traceback: str = ""
    # with ``traceback``: patterns read on every line, as a signature's without it (a
    # package's own words that say the cause whole, with no traceback needed)
    line_patterns: Tuple[re.Pattern, ...] = ()
    note: str = ""

    def search(self, text):
        """The first match of any pattern in ``text``, or None."""
        return _first(self.patterns, text)

    def line_search(self, text):
        """The first match in ``text`` of a pattern read line by line: ``line_match``'s
        for a signature with ``traceback``, else ``match``'s."""
        return _first(self.line_patterns, text) if self.traceback else _first(self.patterns, text)

    def weak_search(self, text):
        """The first match of a ``weak_match`` pattern in ``text``, or None."""
        return _first(self.weak, text)

    def alone_search(self, text):
        """The first match of an ``alone_match`` pattern in ``text``, or None."""
        return _first(self.alone, text)

    def alone_unless_search(self, text):
        """The first match of an ``alone_unless`` pattern in ``text``, or None."""
        return _first(self.alone_unless, text)

    def differ_search(self, text):
        """The first match of a ``differ_match`` pattern in ``text``, or None."""
        return _first(self.differ_patterns, text)

    def to_dict(self):
        d = {"id": self.id, "cause": self.cause, "advice": self.advice,
             "sources": [self.source], "file": self.where.file, "entry": self.where.index,
             "caught_by": list(self.caught_by), "gpu_only": self.gpu,
             "symptom": self.symptom}
        if self.framework_advice:
            d["framework_advice"] = dict(self.framework_advice)
        if self.advice_from:
            d["advice_from"] = self.advice_from
        return d


def _strings(value):
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("expected a string or a non-empty list of strings, got %r" % (value,))


def _optional_strings(errors, where, label, e, key):
    """``e[key]`` as a tuple of strings; () when absent or after recording the error."""
    if key not in e:
        return ()
    try:
        return _strings(e[key])
    except ValueError as exc:
        errors.add(where, "%s: %s: %s" % (label, key, exc))
        return ()


def _patterns(errors, where, label, e, sources, key):
    """The compiled patterns of ``sources`` (``e[key]``); errors for those that do not
    compile or hold no scan word."""
    patterns = []
    for source in sources:
        try:
            pattern = re.compile(source)
        except re.error as exc:
            errors.add(where, "%s: %s %r is not a regular expression: %s"
                       % (label, key, source, exc))
            continue
        if not any(word in source for word in SCAN_WORDS):
            errors.add(where, "%s: %s %r holds none of the words the log scan looks "
                       "for (%s): its lines would never be read"
                       % (label, key, source, ", ".join(SCAN_WORDS)))
        if e.get("differ") and pattern.groups < 1:
            errors.add(where, "%s: differ = true needs a group in %s %r (the value "
                       "that must be the same on every rank)" % (label, key, source))
        patterns.append(pattern)
    return patterns


def _optional_patterns(errors, where, label, e, key):
    """The compiled patterns of an optional list of patterns (``weak_match``,
    ``alone_match``, ``differ_match``); () where it is absent or not a list of strings."""
    if key not in e:
        return ()
    try:
        return tuple(_patterns(errors, where, label, e, _strings(e[key]), key))
    except ValueError as exc:
        errors.add(where, "%s: %s: %s" % (label, key, exc))
        return ()


def parse(errors, where, e, probes, framework_advice):
    """One ``[[signature]]`` table, validated; None when it cannot be built.
    ``framework_advice``: load's parser of that table (shared with expectations)."""
    for key in sorted(set(e) - SIGNATURE_KEYS):
        errors.add(where, "unknown key %r (allowed: %s)" % (key, ", ".join(sorted(SIGNATURE_KEYS))))
    sid = e.get("id")
    if not isinstance(sid, str) or not _ID.match(sid):
        errors.add(where, "id must be a dotted lower-case name like \"nccl.shm_full\", got %r"
                   % (sid,))
        return None
    label = "signature %s" % sid
    for key in ("cause", "source"):
        if not isinstance(e.get(key), str) or not e[key].strip():
            errors.add(where, "%s: %s is required (a non-empty string)" % (label, key))
    try:
        sources = _strings(e.get("match"))
    except ValueError as exc:
        errors.add(where, "%s: match: %s" % (label, exc))
        return None
    patterns = _patterns(errors, where, label, e, sources, "match")
    weak = _optional_patterns(errors, where, label, e, "weak_match")
    weak_needs = _optional_strings(errors, where, label, e, "weak_needs")
    if bool(weak) != bool(weak_needs):
        errors.add(where, "%s: weak_match and weak_needs come together (the patterns, and "
                   "the signatures one of which must fire too)" % label)
    alone = _optional_patterns(errors, where, label, e, "alone_match")
    alone_cause = e.get("alone_cause", "")
    if alone and not alone_cause:
        errors.add(where, "%s: alone_match needs alone_cause (the cause as a guess)" % label)
    if alone_cause and not (isinstance(alone_cause, str) and any(
            w in alone_cause for w in CONFIDENCE_WORDS)):
        errors.add(where, "%s: alone_cause must say how sure it is (%s): it is read from "
                   "lines a working job prints too" % (label, ", ".join(CONFIDENCE_WORDS)))
        alone_cause = ""
    alone_unless = _optional_patterns(errors, where, label, e, "alone_unless")
    if alone_unless and not alone_cause:
        errors.add(where, "%s: alone_unless comes with alone_cause (it cancels that guess)"
                   % label)
    differ_patterns = _optional_patterns(errors, where, label, e, "differ_match")
    if "differ_match" in e:
        for p in differ_patterns:
            if "value" not in p.groupindex:
                errors.add(where, "%s: differ_match %r needs a group named value (what "
                           "must be the same on every rank)" % (label, p.pattern))
        if e.get("differ"):
            errors.add(where, "%s: differ and differ_match do not go together" % label)
    advice, advice_from = e.get("advice"), e.get("advice_from")
    if (advice is None) == (advice_from is None):
        errors.add(where, "%s: give advice or advice_from (a check whose expected failure "
                   "holds the advice), one of them" % label)
    if advice_from is not None:
        reason = catalog.unknown_reason(advice_from, probes) if isinstance(
            advice_from, str) else "advice_from must be a check id"
        if reason:
            errors.add(where, "%s: advice_from: %s" % (label, reason))
        if "framework_advice" in e:
            errors.add(where, "%s: framework_advice comes with advice_from's expectation; "
                       "write it there" % label)
    caught_by = _optional_strings(errors, where, label, e, "caught_by")
    for check in caught_by:
        reason = None if check == PREINSTALL else catalog.unknown_reason(check, probes)
        if reason:
            errors.add(where, "%s: caught_by: %s" % (label, reason))
    flags = {}
    for key in ("gpu", "symptom", "differ"):
        value = e.get(key, False)
        if not isinstance(value, bool):
            errors.add(where, "%s: %s must be true or false, got %r" % (label, key, value))
            value = False
        flags[key] = value
    needs = _optional_strings(errors, where, label, e, "needs")
    explains = _optional_strings(errors, where, label, e, "explains")
    traceback = e.get("traceback", "")
    if traceback and traceback not in TRACEBACK_RULES:
        errors.add(where, "%s: traceback must be one of %s, got %r"
                   % (label, ", ".join(TRACEBACK_RULES), traceback))
        traceback = ""
    if traceback and (weak or alone or differ_patterns or flags["differ"]):
        errors.add(where, "%s: traceback reads exception lines only: no weak_match, "
                   "alone_match, differ or differ_match beside it" % label)
    line_patterns = _optional_patterns(errors, where, label, e, "line_match")
    if line_patterns and not traceback:
        errors.add(where, "%s: line_match is for a signature with traceback (without it, "
                   "match is read line by line)" % label)
    fw = framework_advice(errors, where, e) if advice is not None else ()
    if not patterns:
        return None
    return Signature(sid, e.get("cause") or "", tuple(patterns), e.get("source") or "",
                     where, advice, advice_from, fw, caught_by, needs=needs,
                     explains=explains, weak=weak, weak_needs=weak_needs,
                     alone=alone, alone_cause=alone_cause, alone_unless=alone_unless,
                     differ_patterns=differ_patterns,
                     traceback=traceback, line_patterns=line_patterns,
                     note=e.get("note", ""), **flags)


def resolve(errors, signatures, expectations, builtin=None):
    """The signatures with ``advice_from`` filled in from that check's expected failure
    (duplicate ids and unresolvable references are errors). ``builtin``: a function that
    gives the built-in expectations, for a ``--matrix`` file that replaced the one holding
    the expected failure (a team whose build passes that check keeps the advice for the
    failure in other people's logs)."""
    seen = {}
    out = []
    fallback = []
    ids = {s.id for s in signatures}
    for s in signatures:
        for key in ("needs", "explains", "weak_needs"):
            for other in getattr(s, key):
                if other not in ids or other == s.id:
                    errors.add(s.where, "signature %s: %s %r: no other signature has that id"
                               % (s.id, key, other))
        if s.id in seen:
            errors.add(s.where, "signature %s is already defined at %s" % (s.id, seen[s.id]))
        seen.setdefault(s.id, s.where)
        if s.advice_from is None:
            out.append(s)
            continue
        failing = _failing(expectations, s.advice_from)
        if not failing and builtin is not None:
            if not fallback:
                fallback.append(builtin())
            failing = _failing(fallback[0], s.advice_from)
        texts = {(e.advice, e.framework_advice) for e in failing}
        if not failing:
            errors.add(s.where, "signature %s: advice_from %s: no expected failure of that "
                       "check has advice" % (s.id, s.advice_from))
            continue
        if len(texts) > 1:
            errors.add(s.where, "signature %s: advice_from %s: its expected failures give "
                       "%d different advices; write the advice here" % (
                           s.id, s.advice_from, len(texts)))
            continue
        e = failing[0]
        out.append(dataclasses.replace(s, advice=e.advice, framework_advice=e.framework_advice))
    return out


def _failing(expectations, check):
    return [e for e in expectations if check in e.checks and e.expects_failure and e.advice]
