"""``envcheck explain`` as a library call: logs in, an ``Explanation`` out (never prints).

Exit codes: 0 a known cause was found (a signature, or a version the matrix says cannot
work); 1 nothing recognised (the explanation then says what to collect next); 2 bad
input (``UsageError``: a path that is not a readable file, an unreadable stream, an
empty input or binary data).
"""

import dataclasses
import gzip
import os
import re
import stat
import sys

from ..core.errors import UsageError
from ..core.outcomes import ExitCode
from ..matrix import load as matrix_load
from . import job_versions as facts_mod, line as line_mod, match, read, structure as structure_mod

# What to collect when nothing is recognised: the log that names most causes.
NEXT_STEPS = (
    "rerun with NCCL_DEBUG=INFO (NCCL's own WARN lines name most NCCL failures, and its "
    "INFO lines the transport it chose) and TORCH_DISTRIBUTED_DEBUG=DETAIL (torch checks "
    "that the ranks call the same collectives)",
    "keep every rank's output: torchrun --tee 3 (or --log-dir), srun --label, so that "
    "each line says its rank",
    "run 'envcheck run' on a node of the job (and under your launcher, see docs/multinode.md): "
    "it starts real ranks and checks launch, NCCL, serialization and checkpoints",
    "run 'envcheck check' for the torch you install, on each node: driver, GPU arch, "
    "Python and glibc, before installing",
)
# The first of them where the log holds NCCL_DEBUG=INFO output already (the H100 run's
# healthy logs were told to rerun with it): what NCCL's INFO lines do not show
WITH_NCCL_INFO = (
    "the log holds NCCL's INFO lines already, and none names a failure: rerun with "
    "TORCH_DISTRIBUTED_DEBUG=DETAIL (torch checks that the ranks call the same "
    "collectives) and, for a hang, TORCH_NCCL_TRACE_BUFFER_SIZE=2000 with "
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1 (torch's Flight Recorder writes what each rank was "
    "running when the timeout came)")

# NCCL's "Using" INFO lines list the interfaces it chose (" [0]eth0:10.0.0.1<0> [1]...");
# a log pasted into a thread (or a terminal of fixed width) often breaks that list onto
# lines of their own, one interface each: read them back into the line (NVIDIA/nccl#697).
USING = re.compile(r"(?:NET/Socket|NET/IB|Bootstrap) ?: ?Using\s*$")
INTERFACE = re.compile(r"^\s*\[\d+\]\S+:\S*<\d+>\s*$")
INTERFACES_READ = 64  # NCCL's MAX_IFS


def _interfaces(hit, ln):
    """``ln`` with the interface list that follows an NCCL "Using" line on lines of its
    own read back into it (the line as it is otherwise)."""
    if not USING.search(ln.text):
        return ln
    listed = []
    for raw in hit.following(INTERFACES_READ):
        text = line_mod.bare(raw)
        if not INTERFACE.match(text):
            break
        listed.append(text.strip())
    if not listed:
        return ln
    return dataclasses.replace(ln, text="%s %s" % (ln.text, " ".join(listed)))


# Lines a log pasted into a thread (or wrapped by a terminal) often breaks after the
# place that says where they failed; the next line is read back into it, where it is
# the rest of that line:
# - c10's and gloo's enforce messages: '[enforce fail at .../gloo/transport/tcp/
#   device.cc:84]', then the check and its words, indented ('ifa != nullptr. Unable to
#   find address for: eth9'; issue #34, phase P: aws-samples/aws-do-eks#51);
# - gloo's refused connect: '[.../gloo/transport/tcp/pair.cc:799] connect', then the peer
#   and the error ('[127.0.1.1]:29591: Connection refused'; phase T:
#   hpcaitech/ColossalAI#2407).
PEER = re.compile(r"^\[[^\]\s]+\]:\d+: \S")
BROKEN = (
    (re.compile(r"\[enforce fail at [^\]\s]+\]\s*$"),
     lambda raw, text: raw[:1] in (b" ", b"\t")),
    (re.compile(r"gloo/transport/tcp/pair\.cc:\d+\] connect\s*$"),
     lambda raw, text: PEER.match(text)),
)


def _rejoined(hit, ln):
    """``ln`` with the rest of it, broken onto the next line, read back into it (the line
    as it is otherwise)."""
    for end, rest in BROKEN:
        if end.search(ln.text):
            for raw in hit.following(1):
                text = line_mod.parse(0, raw).text
                if text and rest(raw, text):
                    return dataclasses.replace(ln, text="%s %s" % (ln.text.rstrip(), text))
            break
    return ln


# A CUDA toolkit of another minor release than torch's: torch's cpp_extension and
# DeepSpeed's op builder warn and build on (a working job prints the warning too); where
# the build then fails below it (ninja's summary, the compiler's missing header, torch's
# 'Error building extension'), the failure is read into the warning's line, which
# extension.cuda_mismatch then reads (issue #34, phase P: deepspeedai/DeepSpeed#3411,
# curand_kernel.h missing from the older toolkit)
MINOR_CUDA = re.compile(r"Installed CUDA version \S+ does not match the version torch was "
                        r"compiled with \S+ but since the APIs are compatible|The detected "
                        r"CUDA version \(\S+\) has a minor version mismatch")
BUILD_FAILED = re.compile(r"^ninja: build stopped: subcommand failed"
                          r"|fatal error: [\w./+-]+\.(?:h|hpp|cuh): No such file or directory"
                          r"|Error building extension '")
BUILD_READ = 400  # a build's compiler output, read below the warning


def _build(hit, ln):
    """``ln`` with the failure of the build that its minor-release warning went on to,
    where one follows it (the line as it is otherwise)."""
    if not MINOR_CUDA.search(ln.text):
        return ln
    for raw in hit.following(BUILD_READ):
        text = line_mod.parse(0, raw).text
        if BUILD_FAILED.search(text):
            return dataclasses.replace(ln, text="%s; then the build failed: %s"
                                       % (ln.text, text[:200]))
    return ln


# An extension's build that failed linking: GNU ld's 'cannot find -lNAME' (binutils
# ldfile.c) some lines above the build's failure, torch's cpp_extension raising
# CalledProcessError for ninja, or 'Error building extension' (torch's, DeepSpeed's op
# builder); where NAME is a CUDA library, the linker's line is read into the failure's,
# which cuda.library_missing reads (issue #34, phase T: deepspeedai/DeepSpeed#5659,
# -lcurand). Another library's is left out: the line stays the program's words.
EXTENSION_FAILED = re.compile(r"Command '\['ninja', '-v'\]' returned non-zero exit status"
                              r"|Error building extension '")
LINK_MISSING = re.compile(r"(?:\S*/)?ld(?:\.\w+)?: cannot find -l(?:cudart|cublas(?:Lt)?|cudnn\w*"
                          r"|nccl|nvrtc|cufft|curand|cusparse(?:Lt)?|cusolver|nvJitLink|cupti"
                          r"|nvToolsExt)\b")


def _link(hit, ln):
    """``ln`` with the linker's missing CUDA library read into it, where the failed
    build's output above it shows one (the line as it is otherwise)."""
    if not EXTENSION_FAILED.search(ln.text):
        return ln
    for raw in reversed(hit.lookback()):
        m = LINK_MISSING.search(line_mod.parse(0, raw).text)
        if m:
            return dataclasses.replace(ln, text="%s; the link failed: %s" % (ln.text, m.group(0)))
    return ln


# ENOSPC raised creating one of Python's multiprocessing semaphores (SemLock: sem_open,
# whose named semaphores glibc keeps as files in /dev/shm), not on a disk. The frame and
# source line just above the error say so; they are read into its line, which
# host.shm_full reads before checkpoint.disk_full does (issue #34, phase R:
# NVIDIA/Megatron-LM#878, a DataLoader's workers in a container's 64 MB /dev/shm)
NO_SPACE = re.compile(r"Error: \[Errno 28\] No space left on device")
SEMLOCK = re.compile(r"_multiprocessing\.SemLock\(|multiprocessing[/\\]synchronize\.py")


def _semaphore(hit, ln):
    """``ln`` saying that it was raised creating a multiprocessing semaphore, where the
    lines just above it show that (the line as it is otherwise)."""
    if not NO_SPACE.search(ln.text):
        return ln
    for raw in reversed(hit.before):
        if SEMLOCK.search(line_mod.parse(0, raw).text):
            return dataclasses.replace(
                ln, text="%s; raised creating multiprocessing's semaphore" % ln.text)
    return ln


# A process that dies of SIGBUS is reported by whichever crash handler it has loaded, each
# printing the frames of the thread that died below its line: UCX (ucs/debug/debug.c:
# "[host:pid:idx:tid] Caught signal 7 (Bus error: ...)", then "==== backtrace (tid: TID)
# ====" and frames "%2d 0x%016lx %s()  %s:%u" or backtrace_symbols' "%2d  LIB(SYM+0x..)
# [0x..]", then "====...===="), Open MPI (opal/util/stacktrace.c: "[host:pid] Signal: Bus
# error (7)", frames "[host:pid] [ N] LIB(SYM+0x..)[0x..]", "*** End of error message
# ***"), abseil's and glog's failure handlers ("*** SIGBUS received at time=...",
# "*** SIGBUS (@0x..) received by PID ...", frames "    @ 0x.. SYM"), gdb ("received
# signal SIGBUS, Bus error.", then "0x.. in SYM (...) from LIB") and CPython 3.14's
# faulthandler ('  Binary file "LIB", at SYM+0x.. [0x..]'). Those frames are read back
# into the line (its text, not the line shown), after " [backtrace: ", so that a
# signature can say whose memory it was: NCCL's frames are its shared memory in /dev/shm
# (nccl.shm_full); other frames, or none, leave the plain SIGBUS (launch.rank_bus_error).
# Other processes' lines may come between (NCCL INFO lines of the other ranks, their own
# "Caught signal" lines): a UCX report takes only the block of its own thread id.
BUS_ERROR = re.compile(r"Bus error|SIGBUS")
UCX_TID = re.compile(r"^\[[^\]]*:\s*(\d+)\] Caught signal")
UCX_BLOCK = re.compile(r"==== backtrace \(tid:\s*(\d+)\) ====")
NATIVE_FRAME = re.compile(
    r"^\d+\s+0x[0-9a-f]+ \S*\(\)"  # UCX, detailed
    r"|^\d+\s+\S+\([^)]*\)\s*\[0x[0-9a-f]+\]"  # UCX, backtrace_symbols
    r"|\[\s*\d+\] \S+\([^)]*\)\s*\[0x[0-9a-f]+\]"  # Open MPI
    r"|^(?:PC: )?@\s+0x[0-9a-f]+\s+\S"  # abseil, glog
    r"|^(?:#\d+\s+)?0x[0-9a-f]+ in \S"  # gdb
    r"|^Binary file \"[^\"]*\", at ")  # CPython 3.14's faulthandler
BACKTRACE_END = re.compile(r"^={8,}\s*$|\*\*\* End of error message \*\*\*")
BACKTRACE_READ = 64  # lines read below a SIGBUS line for its frames
FRAMES_KEPT = 64  # UCX's BACKTRACE_MAX


def _backtrace(hit, ln):
    """``ln`` with the native frames a crash handler printed below its SIGBUS line read
    back into its text (the line as it is otherwise)."""
    if "Bus error" not in ln.text and "SIGBUS" not in ln.text:
        return ln
    tid = UCX_TID.search(ln.text)
    mine = tid is None  # a UCX report: only the block of its own thread
    frames = []
    for raw in hit.following(BACKTRACE_READ):
        text = line_mod.parse(0, raw).text
        block = UCX_BLOCK.search(text)
        if block:
            if frames:
                break
            mine = tid is None or block.group(1) == tid.group(1)
            continue
        if frames and BACKTRACE_END.search(text):
            break
        if mine and NATIVE_FRAME.search(text):
            frames.append(text[:200])
            if len(frames) >= FRAMES_KEPT:
                break
    if not frames:
        return ln
    return dataclasses.replace(ln, text="%s [backtrace: %s]" % (ln.text, " | ".join(frames)))


@dataclasses.dataclass
class Explanation:
    inputs: list  # [{"name", "lines", "bytes"}]
    findings: list  # [match.Finding]: the causes
    consequences: list  # [match.Finding]: symptoms of the causes
    facts: object  # facts.Facts
    judgements: list  # [facts.Judgement]
    frameworks: list  # keys of core.frameworks.FRAMEWORKS seen in the log
    structure: list = dataclasses.field(default_factory=list)  # structure.summary() lines
    structure_data: dict = dataclasses.field(default_factory=dict)  # structure.to_dict()
    cut: list = dataclasses.field(default_factory=list)  # [structure.Cut]: inputs cut short

    @property
    def exit_code(self):
        if self.findings or any(j.verdict == "problem" for j in self.judgements):
            return ExitCode.OK
        return ExitCode.FAILED


def _open(path):
    """(name, binary stream) for a path or '-' (stdin); UsageError when unreadable."""
    if path == "-":
        return "<stdin>", read.opened(sys.stdin.buffer)
    if os.path.isdir(path):
        raise UsageError("%s is a directory: give the log files in it" % path)
    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise UsageError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    try:
        if stream.peek(2)[:2] == b"\x1f\x8b":  # a gzipped log, read as it decompresses
            stream = gzip.GzipFile(fileobj=stream, mode="rb")
        # a log written as UTF-16 (Windows PowerShell's >) or with a byte-order mark; a
        # JSON log (a container runtime's, a log shipper's): the text it holds
        return path, read.opened(stream, path)
    except (OSError, EOFError) as exc:
        stream.close()
        raise UsageError("cannot read %s: %s" % (path, getattr(exc, "strerror", None)
                                                  or exc)) from None


TAIL_BYTES = 65536  # where a log's torchrun summary is: its end


def _origin(name, logs):
    """Where this log is from (``line.origin``), read from the end of its file: one
    host's of a job across hosts. Its host only among several logs (alone, it is the
    only one); nothing for stdin or a pipe, or a log whose end is not plain text (gzip,
    UTF-16, JSON)."""
    try:
        if name == "<stdin>" or not stat.S_ISREG(os.stat(name).st_mode):
            return 0, None  # a pipe (<(zcat ...)) is read once, by the scan
        with open(name, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
            first_rank, host = line_mod.origin(f.read().split(b"\n"))
    except OSError:
        return 0, None
    return first_rank, host if logs > 1 else None


def _scan(name, stream, scan, logs, matcher, structure, facts, frameworks):
    """Read one log through: every line to the matcher, the structure and the facts."""
    try:
        for hit in scan:
            ln = line_mod.parse(hit.number, hit.data, hit.before)
            ln = _rejoined(hit, _interfaces(hit, ln))
            ln = _backtrace(hit, _semaphore(hit, _link(hit, _build(hit, ln))))
            structure.feed(hit, ln, name, matcher.feed(ln, name))
            facts.feed(ln, name)
            frameworks += [k for k in hit.frameworks if k not in frameworks]
    except read.EmptyLog as exc:
        # among several logs, an empty one is a rank that printed nothing: said in
        # the inputs (0 lines), not a refusal; all of them empty, there is no log
        if logs == 1:
            raise UsageError("%s %s" % (name, exc)) from None
    except read.NotALog as exc:
        raise UsageError("%s %s" % (name, exc)) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise UsageError("cannot read %s: %s" % (name, getattr(exc, "strerror", None)
                                                  or exc)) from None
    finally:
        if name != "<stdin>":
            stream.close()
    tail = scan.tail()
    cut = structure.ended(name, tail, scan.lines)
    if cut is not None and cut.raised:
        # the statement that raised, where the log is cut before the exception line
        # (structure.RAISE): read as that line, in the statement's place
        number, index, said = cut.raised
        hit = read.hit_in(tail, index, number)
        ln = dataclasses.replace(line_mod.parse(number, tail[index], hit.before), text=said)
        structure.feed(hit, ln, name, matcher.feed(ln, name))


def explain(paths, matrix_dirs=(), matrix=None):
    """Read every log in ``paths`` ('-' is stdin) and explain them together (with
    ``matrix``, or the one loaded from the built-in files and ``matrix_dirs``)."""
    matrix = matrix or matrix_load.load(tuple(matrix_dirs))
    opened = [_open(p) for p in (paths or ["-"])]
    matcher = match.Matcher(matrix.signatures)
    facts = facts_mod.Facts()
    structure = structure_mod.Structure(
        judge=lambda ln, file, frames, whole, source: matcher.feed_exception(
            ln, file, frames, whole, structure_mod.TRACEBACK_RULES, source))
    inputs, frameworks = [], []
    for name, stream in opened:
        scan = read.Scan(stream)
        with line_mod.read_as(*_origin(name, len(opened))):
            _scan(name, stream, scan, len(opened), matcher, structure, facts, frameworks)
        inputs.append({"name": name, "lines": scan.lines, "bytes": scan.bytes})
    if not any(i["bytes"] for i in inputs):
        raise UsageError("%s: every log given is empty: there is no log in them"
                         % ", ".join(i["name"] for i in inputs))
    findings, consequences = structure_mod.arrange(structure, *matcher.results())
    if findings:
        # beside a cause, a log cut inside a launcher's traceback (runpy's and torch's
        # frames only: torchrun's ChildFailedError, cut) says nothing more
        structure.cut = [cut for cut in structure.cut if cut.culprit]
    return Explanation(inputs, findings, consequences, facts,
                       facts_mod.judge(facts, matrix), frameworks, structure.summary(),
                       structure.to_dict(), structure.cut)
