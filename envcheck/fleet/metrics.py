"""The answer as monitoring scrapes it: node_exporter's textfile-collector format, made by
the Prometheus client library (a ``CollectorRegistry`` written by ``write_to_textfile``,
which writes a file beside the target and renames it: a scrape never reads half a file).

Each command has its own family prefix (``envcheck_run_``, ``envcheck_check_``,
``envcheck_summary_``), so that the files of all three can sit in one textfile directory
without two files giving one family different help. Every value comes from the JSON the
same command writes (``--json``), so the two always agree:

run (and report) : ``ready``, ``exit_code``, ``timestamp_seconds`` (when it ran),
                   ``duration_seconds``, ``info`` (envcheck, torch, CUDA, cuDNN, NCCL,
                   driver, Python, backend as labels), ``check_ok`` (per check, 1 unless
                   it fails the run; outcome and verdict as labels), ``host_ready`` (per
                   host, as ``fleet/hosts`` blames), ``bandwidth_bytes_per_second`` (per
                   host and direction; per rank on one host), ``clock_offset_seconds`` and
                   ``clock_offset_bound_seconds`` (per host, against the reference host)
check            : ``will_work``, ``exit_code``, ``timestamp_seconds``, ``info`` (host,
                   requirement, build, torch, CUDA, driver, Python, glibc),
                   ``criterion_ok`` (per criterion, its status as a label)
summary          : ``nodes`` (per status), ``host_ready`` (per host), ``exit_code``,
                   ``problems``, ``timestamp_seconds``
"""

import datetime

from ..core.errors import UsageError

GB = 1e9  # the reports' bandwidth is in GB/s (nccl-tests' busbw), metrics in base units


def _registry():
    from prometheus_client import CollectorRegistry

    return CollectorRegistry(auto_describe=True)


def _gauge(registry, name, doc, labels=()):
    from prometheus_client import Gauge

    return Gauge(name, doc, list(labels), registry=registry)


def _info(registry, name, doc, values):
    from prometheus_client import Info

    Info(name, doc, registry=registry).info({k: "" if v is None else str(v)
                                             for k, v in values.items()})


def epoch(created):
    """'2026-11-25T21:56:12+00:00' -> seconds since the epoch; None when unreadable."""
    try:
        return datetime.datetime.fromisoformat(str(created)).timestamp()
    except (TypeError, ValueError):
        return None


def _when(registry, prefix, what, created):
    seconds = epoch(created)
    if seconds is not None:
        _gauge(registry, prefix + "timestamp_seconds",
               "When %s ran (seconds since the epoch)." % what).set(seconds)


def for_report(data):
    """A registry for a run report (``Report.to_dict()``, redacted)."""
    from . import hosts
    from ..report.model import Report

    reg = _registry()
    answer = data.get("answer") or {}
    env = data.get("environment") or {}
    ranks = data.get("ranks") or []
    p = "envcheck_run_"
    _gauge(reg, p + "ready", "1 when the run says the environment is ready for "
           "distributed training, else 0.").set(1 if answer.get("ready") else 0)
    _gauge(reg, p + "exit_code", "What envcheck run exited with (0 nothing unexpected, 1 "
           "unexpected results).").set(answer.get("exit_code", 0))
    _when(reg, p, "the run", data.get("created"))
    _gauge(reg, p + "duration_seconds", "How long the run took.").set(
        data.get("duration_s") or 0)
    _info(reg, p[:-1], "The versions the run saw (rank 0's), as labels.",
          {"envcheck_version": data.get("envcheck_version"), "torch": env.get("torch"),
           "cuda": env.get("cuda"), "cudnn": env.get("cudnn"), "nccl": env.get("nccl"),
           "driver": env.get("driver"), "python": env.get("python"),
           "backend": (ranks[0].get("backend") if ranks else None)})
    report = Report.from_dict(data)
    ok = _gauge(reg, p + "check_ok", "1 unless this check fails the run (an unexpected "
                "result; a known issue does not); its outcome and verdict as labels.",
                ("check", "outcome", "verdict"))
    for c in report.checks:
        ok.labels(c.id, c.outcome, c.verdict or "").set(0 if hosts.failing(c) else 1)
    ready = _gauge(reg, p + "host_ready", "1 when no failing check blames this host.",
                   ("host",))
    for host, blames in hosts.blamed(report).items():
        ready.labels(host).set(0 if blames or report.interrupted else 1)
    checks = {c.id: c for c in report.checks}
    _bandwidth(reg, p, checks.get("bandwidth.per_host"), hosts.rank_hosts(report))
    _clock(reg, p, checks.get("hosts.clock"))
    return reg


def _first_data(check, key):
    for _, entry in sorted((check.ranks or {}).items(), key=lambda kv: str(kv[0])):
        data = (entry or {}).get("data") or {}
        if data.get(key) is not None:
            return data
    return None


def _bandwidth(reg, p, check, rank_hosts):
    data = _first_data(check, "out_gbs") if check else None
    if not data:
        return
    g = _gauge(reg, p + "bandwidth_bytes_per_second",
               "Send/recv bus bandwidth (nccl-tests' busbw) out of and into each host "
               "(each rank, on one host: then rank is set).", ("host", "rank", "direction"))
    for i, name in enumerate(data.get("names") or []):
        if data.get("unit") == "rank":
            rank = str(name).split()[-1]
            host = rank_hosts.get(int(rank), "") if rank.isdigit() else ""
        else:
            host, rank = str(name), ""
        for direction, key in (("out", "out_gbs"), ("in", "in_gbs")):
            values = data.get(key) or []
            if i < len(values) and isinstance(values[i], (int, float)):
                g.labels(host, rank, direction).set(values[i] * GB)


def _clock(reg, p, check):
    data = _first_data(check, "offsets") if check else None
    if not data:
        return
    off = _gauge(reg, p + "clock_offset_seconds", "How far each host's wall clock is from "
                 "the reference host's (positive: ahead).", ("host", "reference"))
    bound = _gauge(reg, p + "clock_offset_bound_seconds", "The most the offset's measure "
                   "can be wrong by (half the round trip).", ("host", "reference"))
    for host, o in sorted(data["offsets"].items()):
        off.labels(host, str(data.get("reference") or "")).set(o["offset_s"])
        bound.labels(host, str(data.get("reference") or "")).set(o["bound_s"])


def for_check(data):
    """A registry for an ``envcheck check`` answer (its JSON)."""
    reg = _registry()
    p = "envcheck_check_"
    answer = data.get("answer") or {}
    node = data.get("node") or {}
    code = data.get("exit_code")
    _gauge(reg, p + "will_work", "1 when the torch build asked about will work on this "
           "node, else 0.").set(1 if code == 0 else 0)
    _gauge(reg, p + "exit_code", "What envcheck check exited with (0 will work, 1 will "
           "not, 3 cannot judge).").set(code if isinstance(code, int) else -1)
    _when(reg, p, "the check", data.get("created"))
    variant = answer.get("variant") or ""
    cuda = "%s.%s" % (variant[2:-1], variant[-1]) if variant.startswith("cu") and \
        variant[2:].isdigit() else ""
    gpus = sorted({g.get("sm") or g.get("name") or "" for g in node.get("gpus") or []})
    _info(reg, p[:-1], "The node and the build the answer is about, as labels.",
          {"envcheck_version": data.get("envcheck_version"), "host": data.get("host"),
           "requirement": data.get("requirement"), "build": answer.get("build"),
           "torch": answer.get("torch"), "cuda": cuda, "driver": node.get("driver"),
           "python": node.get("python_full") or node.get("python"),
           "glibc": node.get("glibc"), "gpus": ",".join(gpus)})
    crit = _gauge(reg, p + "criterion_ok", "1 unless this criterion says the build will "
                  "not work (fail) or cannot be judged (unknown); its status as a label.",
                  ("criterion", "status"))
    for c in answer.get("criteria") or []:
        crit.labels(c["id"], c["status"]).set(0 if c["status"] in ("fail", "unknown") else 1)
    return reg


def for_summary(data):
    """A registry for an ``envcheck summary`` (its JSON)."""
    reg = _registry()
    p = "envcheck_summary_"
    detail = data.get("nodes_detail") or []
    nodes = _gauge(reg, p + "nodes", "Nodes by what their answers say: works, fails, "
                   "unknown (cannot be judged).", ("status",))
    for status in ("works", "fails", "unknown"):
        nodes.labels(status).set(sum(1 for n in detail if n.get("status") == status))
    ready = _gauge(reg, p + "host_ready", "1 when the host's answers say it will work.",
                   ("host",))
    for n in detail:
        ready.labels(n["host"]).set(1 if n.get("status") == "works" else 0)
    _gauge(reg, p + "problems", "Inputs the summary could not use.").set(
        len(data.get("problems") or []))
    _gauge(reg, p + "exit_code", "What envcheck summary exited with.").set(
        data.get("exit_code", 0))
    _when(reg, p, "the summary", data.get("created"))
    return reg


def check_path(path):
    """Bad --metrics before any work: one line, exit 2."""
    if path:
        from ..report.model import check_writable

        check_writable(path)


def write(path, registry):
    """The registry to PATH in the text format node_exporter's textfile collector reads."""
    from prometheus_client import write_to_textfile

    try:
        write_to_textfile(path, registry)
    except OSError as exc:
        raise UsageError("cannot write %s: %s" % (path, exc.strerror or exc)) from None
