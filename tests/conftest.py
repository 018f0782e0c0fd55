"""Shared helpers: run the real CLI in a subprocess and read its JSON report.

No mocks of torch.distributed anywhere: every run starts real ranks with real gloo
process groups on CPU.
"""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "envcheck", "schema", "report.schema.json")


@dataclasses.dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args, timeout=180, env=None, cwd=None):
    full_env = dict(os.environ)
    full_env.pop("SLURM_PROCID", None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd or ROOT,
                          stdin=subprocess.DEVNULL)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def validate_report(data):
    import jsonschema

    with open(SCHEMA, encoding="utf-8") as f:
        jsonschema.validate(data, json.load(f))
    return data


def load_report(path):
    with open(path, encoding="utf-8") as f:
        return validate_report(json.load(f))


def checks_by_id(report):
    return {c["id"]: c for c in report["checks"]}


@pytest.fixture
def write_probes(tmp_path):
    """Write a custom probe file (``def probe_NAME(ctx)``) and return its path."""
    def write(source, name="my_probes.py"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return str(path)
    return write
