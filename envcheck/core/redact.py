"""Secrets never reach a report, a screen or an error line: by name and by value.

By name: an environment variable whose name says it holds a secret (TOKEN, KEY, SECRET,
PASSWORD, PASSPHRASE, CREDENTIAL, AUTH, JWT, COOKIE) is collected as ``<redacted>``, and
of SLURM's variables only those that describe the job's shape are collected at all.
By value: credentials in URLs (``https://user:PASS@host``), ``password=...``-style
assignments and the token formats of the services ML engineers use (GitHub, Hugging Face,
Slack, AWS, OpenAI-style keys, GitLab, JWTs) are replaced wherever they appear — an
exception message, a traceback, a requirement, a path.
"""

import re

REDACTED = "<redacted>"

SECRET_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|AUTH|JWT|COOKIE", re.I)

# SLURM's variables that say how the job is laid out; the rest (SLURM_JWT, SLURM_CONF
# paths, user and account names...) are not collected.
SLURM_ALLOWED = frozenset((
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES",
    "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_STEP_NODELIST", "SLURM_CPUS_PER_TASK",
    "SLURM_CPUS_ON_NODE", "SLURM_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_JOB_PARTITION", "SLURM_CLUSTER_NAME", "SLURM_DISTRIBUTION", "SLURM_CPU_BIND",
    "SLURM_MPI_TYPE", "SLURM_TOPOLOGY_ADDR",
))

_VALUES = (
    # scheme://user:password@host -> the password goes, the rest helps debugging
    (re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+):([^/\s@]+)@"), r"\1:%s@" % REDACTED),
    (re.compile(r"(?i)\b((?:pass(?:word|wd|phrase)?|token|secret|api[_-]?key|auth)"
                r"\s*[=:]\s*)(['\"]?)[^\s'\",;&]+"), r"\1\2%s" % REDACTED),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
)


# What every pattern above needs somewhere in the text to match: most strings of a
# report (thousands) hold none of it, and skip the nine substitutions.
_MAYBE = re.compile(r"://|(?i:pass|token|secret|api[_-]?key|auth)|gh[pousr]_|github_pat_"
                    r"|hf_|xox[abprs]-|AKIA|ASIA|sk-|glpat-|eyJ")


def text(value):
    """``value`` with every secret-looking value replaced."""
    if not _MAYBE.search(value):
        return value
    for pattern, replacement in _VALUES:
        value = pattern.sub(replacement, value)
    return value


def deep(value):
    """Every string inside (dict keys included) redacted by value."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {deep(k): deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [deep(v) for v in value]
    return value


def environment_value(name, value):
    """What may be collected of one environment variable (None: not collected)."""
    if name.startswith("SLURM_") and name not in SLURM_ALLOWED:
        return None
    if SECRET_NAME.search(name):
        return REDACTED
    return text(value)
