"""One log line made comparable: text, and the rank and host it came from.

Bytes are decoded as UTF-8 with invalid sequences replaced, colour codes and carriage
returns are dropped, and the prefixes launchers put before a rank's output are read off
(repeatedly: ``10.0.0.5: [rank3]: ...`` has two):

| prefix | who writes it | gives |
|---|---|---|
| ``[rank3]:`` | torchrun (torch >= 2.2, each rank's stderr) | rank 3 |
| ``[rank: 3] `` | Lightning (``Global seed set``, ``rank_zero_info``) | rank 3 |
| ``[default3]:`` | torchrun ``--tee`` (role ``default``, local rank 3) | rank 3, unless a ``[rankN]:`` follows (the local rank: on one host, the rank) |
| ``3: `` | ``srun --label`` | rank 3 |
| ``[1,3]<stdout>:`` | ``mpirun --tag-output`` | rank 3 |
| ``node-7: `` / ``10.0.0.5: `` | pdsh (DeepSpeed's multi-node launcher) | host |
| ``host:pid:tid [0] NCCL ...`` | NCCL itself (kept in the text) | host |
| ``[Rank 3]`` / ``[PG 0 Rank 3]`` | torch's NCCL watchdog (kept in the text) | rank 3 |
| ``[pod/worker-1/pytorch] `` | ``kubectl logs --prefix`` (``[node/N] ``) | host: the pod |
| ``Nov 27 04:00:01 node7 python3[42]: `` | syslog, ``journalctl`` (``-o short``) | host node7 |

A ``[rank3]:`` or ``[default3]:`` prefix after blanks (a log pasted into a thread with
every line indented) is read the same way; Ray's ``(WorkerDict pid=12) `` is skipped,
with its ``, ip=ADDR`` (a worker on another node) too, and SkyPilot's
``(task-name, pid=12) ``.

A line torchrun's failure summary prints (``traceback : Signal 6 ...``) has no prefix;
its ``rank : 1 (local_rank: 1)`` and ``host : ...`` lines just before it give them.
"""

import contextlib
import dataclasses
import re
from typing import Optional

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# kubectl logs --prefix (kubectl's pkg/cmd/logs/logs.go: '[pod/%s/%s] ', pod and
# container; '[node/%s] '): a pod of the job, or a node, is its host. It wraps every line
# of the log, a summary's and an interface list's too (``bare``).
_KUBECTL = re.compile(r"\[(?:pod/([^/\]\s]+)/[^\]\s]*|node/([^\]\s]+))\] ")
# syslog's and journald's line (RFC 3164's 'TIMESTAMP HOSTNAME TAG: ', journalctl's
# default -o short 'Nov 27 04:00:01 node7 python3[4242]: ', -o short-iso and rsyslog's
# RFC 3339 time): a job run as a service, a node's kernel lines (NVRM: Xid); the host
_SYSLOG = re.compile(r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
                     r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)) "
                     r"([A-Za-z0-9][\w.-]*) [\w.@/()-]+(?:\[\d+\])?: ")
# container runtimes' ISO times; the CRI log format (containerd, CRI-O: the files of
# /var/log/pods) adds the stream and F (a full line) or P (part of a long one)
_RUNTIME = re.compile(r"\d{4}-\d\d-\d\dT[\d:.,]+(?:Z|[+-]\d\d:\d\d)\s"
                      r"(?:std(?:out|err) [FP] )?")
_COLLECTORS = (_KUBECTL, _SYSLOG, _RUNTIME)
_PREFIXES = (
    (re.compile(r"[ \t]*\[(?:rank|Rank )(\d+)\]:\s?"), "rank"),
    (re.compile(r"\[rank: (\d+)\] "), "rank"),  # Lightning's rank_zero_* and seed lines
    (re.compile(r"[ \t]*\[[A-Za-z_]+?(\d+)\]:\s?"), "local"),  # torchrun --tee: [default3]:
    (re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:\s?"), "rank"),
    (_KUBECTL, "host"),
    (_SYSLOG, "host"),
    (re.compile(r"\s*(\d{1,6}): "), "rank"),
    (re.compile(r"((?:\d{1,3}\.){3}\d{1,3}): "), "host"),
    (re.compile(r"([A-Za-z][\w-]*\d[\w-]*): "), "host"),
    (re.compile(r"\[\d{4}-\d\d-\d\d[ T][\d:.,]+Z?\]\s*"), None),  # NCCL_DEBUG timestamps
    (_RUNTIME, None),
    # Ray: actors, tasks, nodes ('(WorkerDict pid=12)'); SkyPilot: a task's name, a comma
    # ('(llama405b-qlora-fsdp, pid=17187)', oumi-ai/oumi#835)
    (re.compile(r"\((?:\w+ |[\w.-]+, )?pid=\d+(?:, ip=[^)]*)?\)\s*"), None),
)
_NCCL_HOST = re.compile(r"^([A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] ")
_WATCHDOG_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\b")
_SUMMARY_HOST = re.compile(r"^\s*host\s*:\s*(\S+)")


# torchrun's summary names each failed rank with its local rank ('rank      : 2
# (local_rank: 0)', torch.distributed.elastic's error summary, every release we list)
_SUMMARY_LOCAL = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")
# Where the log being read is from (``origin``): the global rank of its local rank 0,
# and its host where it has one.
_first_rank, _host = 0, None


def origin(tail):
    """(the global rank of local rank 0, its host or None) of a log whose torchrun
    summary is among ``tail`` (its last lines, bytes): every entry's rank less its
    local rank, where they agree, else 0; the host every entry names, else None.

    ``--tee`` names a rank by its local rank only (``[default0]:``, pytorch/pytorch
    #75087), and before pytorch/pytorch#118190 (torch 2.3) nothing else named it, not
    even in a traceback. One host's log of a job across hosts then numbers its ranks
    from 0, like every other host's: its agent's summary says where they start, and on
    which host its lines were printed."""
    starts, hosts = set(), set()
    for raw in tail:
        text = bare(raw)
        m = _SUMMARY_LOCAL.match(text)
        if m:
            starts.add(int(m.group(1)) - int(m.group(2)))
        m = _SUMMARY_HOST.match(text)
        if m:
            hosts.add(m.group(1))
    if len(starts) != 1:
        return 0, None
    return starts.pop(), hosts.pop() if len(hosts) == 1 else None


@contextlib.contextmanager
def read_as(first_rank, host=None):
    """Read the lines of the log being read as from ``origin``: a rank named by its
    local rank is ``first_rank`` on, a line no prefix places is ``host``'s."""
    global _first_rank, _host
    _first_rank, _host = first_rank, host
    try:
        yield
    finally:
        _first_rank, _host = 0, None


@dataclasses.dataclass
class Line:
    number: int  # 1-based, in its file
    text: str  # without prefixes: what signatures are matched against
    shown: str  # as the log has it, colour codes and CR removed
    rank: Optional[int] = None
    host: Optional[str] = None


def clean(data):
    """Bytes of one line as text: UTF-8 (invalid bytes replaced), no colour codes, no CR
    (of a line redrawn with CR, its last state)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if "\x00" in text:  # a crash's zeros (read.NUL_RUN)
        text = text.replace("\x00", "")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text


def bare(data):
    """A line as ``clean`` gives it, without the prefix a log collector put before every
    line (kubectl's, syslog's, a container runtime's): what torchrun's summary and NCCL's
    interface list are read from."""
    text = clean(data)
    for pattern in _COLLECTORS:
        m = pattern.match(text)
        if m:
            text = text[m.end():]
    return text


def parse(number, data, before=()):
    """A ``Line`` from the bytes of a log line and the lines before it."""
    shown = clean(data)
    text, rank, host, local = shown, None, None, None
    changed = True
    while changed:
        changed = False
        for pattern, kind in _PREFIXES:
            m = pattern.match(text)
            if m and m.end() < len(text):
                if kind == "rank" and rank is None:
                    rank = int(m.group(1))
                elif kind == "local" and local is None:
                    local = int(m.group(1))
                elif kind == "host" and host is None:
                    host = next(g for g in m.groups() if g)
                text = text[m.end():]
                changed = True
                break
    if rank is None and local is not None:
        rank = local + _first_rank
    m = _NCCL_HOST.match(text)
    if m and host is None:
        host = m.group(1)
    if rank is None:
        m = _WATCHDOG_RANK.search(text)
        if m:
            rank = int(m.group(1))
    if rank is None and before:
        # torchrun's summary: "rank : 1 (local_rank: 1)" a few lines up, in this entry
        for raw in reversed(before):
            prev = bare(raw)
            m = _SUMMARY_RANK.match(prev)
            if m:
                rank = int(m.group(1))
            m = _SUMMARY_HOST.match(prev)
            if m and host is None:
                host = m.group(1)
            if prev.strip().startswith("[") or rank is not None and host is not None:
                break  # the start of this entry ("[0]:"), or all found
    return Line(number, text.strip(), shown.rstrip(), rank, host or _host)
