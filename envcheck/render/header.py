"""The environment a report ran in: one reading, shown by every renderer.

``facts`` reads the report once (the table, markdown and JUnit used to each read it
themselves, and had drifted apart); ``rows`` words those facts for people.
"""


def _gpus(env):
    return ["%s (sm_%s)" % (g.get("name"), str(g.get("capability", "")).replace(".", ""))
            for g in env.get("gpus") or []]


def _frameworks(env):
    from ..core.frameworks import FRAMEWORKS

    found = env.get("frameworks") or {}
    return ", ".join(("%s %s" % (f.name, found[k])).strip()
                     for k, f in FRAMEWORKS.items() if k in found)


def facts(report):
    """Raw values, keyed for machines (JUnit properties use these names)."""
    env = report.environment or {}
    plan = report.plan or {}
    ranks = report.ranks or []
    backends = sorted({r.get("backend") for r in ranks if r.get("backend")})
    return {
        "envcheck_version": report.envcheck_version,
        "created": report.created,
        "torch": env.get("torch"),
        "torch_git": env.get("torch_git"),
        "cuda": env.get("cuda"),
        "cudnn": env.get("cudnn"),
        "nccl": env.get("nccl"),
        "driver": env.get("driver"),
        "gpus": "; ".join(_gpus(env)),
        "python": env.get("python") or plan.get("python_version"),
        "python_executable": plan.get("python"),
        "os": env.get("os"),
        "glibc": env.get("glibc"),
        "numpy": env.get("numpy"),
        # "Lightning 2.6.6, Accelerate 1.15.0": the training frameworks the ranks have
        "frameworks": _frameworks(env),
        "world_size": plan.get("nproc"),
        "hosts": ",".join(sorted({r.get("host") for r in ranks if r.get("host")})),
        "backend": ",".join(backends) or plan.get("backend"),
        "timeout_s": plan.get("timeout"),
        "interrupted": report.interrupted,
    }


def learned(report):
    """Whether a rank reported its environment (the torch it imported first of all). A
    run stopped before that (Ctrl-C while the ranks start) learned none of it: its
    header says '?', never 'not installed' or 'none'."""
    return bool((report.environment or {}).get("torch"))


def rows(report):
    """(label, text) for the header of the table and of the markdown summary."""
    f = facts(report)
    git = " (git %s)" % f["torch_git"][:10] if f["torch_git"] else ""
    if learned(report):
        cuda = "%s / %s / %s" % (f["cuda"] or "none", f["cudnn"] or "-", f["nccl"] or "-")
        driver, numpy = f["driver"] or "no nvidia-smi", f["numpy"] or "not installed"
        gpus = f["gpus"].replace("; ", ", ") or "none visible to torch"
        system = "%s / %s" % (f["os"] or "?", f["glibc"] or "-")
    else:
        cuda, driver, numpy, gpus, system = "? / ? / ?", "?", "?", "?", "? / ?"
    return [
        ("torch", "%s%s" % (f["torch"] or "?", git)),
        ("CUDA / cuDNN / NCCL", cuda),
        ("driver", driver),
        ("GPUs", gpus),
        ("Python", "%s (%s)" % (f["python"] or "?", f["python_executable"] or "?")),
        ("OS / glibc", system),
        ("numpy", numpy),
    ] + ([("frameworks", f["frameworks"])] if f["frameworks"] else []) + [
        ("ranks", "%s on %s, backend %s" % (f["world_size"] or "?",
                                              f["hosts"].replace(",", ", ") or "?",
                                              f["backend"] or "?")),
    ]
