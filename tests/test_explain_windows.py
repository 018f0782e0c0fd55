"""A traceback printed on Windows: its standard library's frames are the standard
library's, not the job's own code.

On Windows the standard library is the installation's Lib directory, with no
pythonX.Y below it (sysconfig's 'nt' scheme, read here: '{installed_base}/Lib'), and
conda's environments print it 'lib'. explain blamed json's own frame for a ValueError
that the job's code raised through json.load; on Linux paths it blamed the job's frame.
The same traceback under both layouts must blame the same frame of the job."""

import sysconfig

import pytest

from envcheck.explain import explainer as command

FRAMES = [  # (file under the job's directory or the standard library, line, function, source)
    ("job", "train.py", 42, "<module>", "main()"),
    ("job", "train.py", 30, "main", "labels = load(path)"),
    ("job", "data.py", 12, "load", "return json.load(open(p))"),
    ("stdlib", "json/__init__.py", 293, "load", "return loads(fp.read(),"),
    ("stdlib", "json/__init__.py", 346, "loads", "return _default_decoder.decode(s)"),
]
ERROR = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"


def _nt_stdlib(base):
    """Where a Windows install of Python keeps its standard library, as sysconfig says."""
    return sysconfig.get_paths(scheme="nt", vars={"installed_base": base, "base": base})[
        "stdlib"].replace("/", "\\")


LAYOUTS = {
    "python.org": (r"C:\Users\me\project", _nt_stdlib(r"C:\Program Files\Python311"), "\\"),
    "conda": (r"D:\work\lib\project", r"C:\Users\me\anaconda3\envs\t\lib", "\\"),
    "linux": ("/home/me/project", "/usr/lib/python3.11", "/"),
}


def _log(job, stdlib, sep):
    out = ["Traceback (most recent call last):"]
    for where, path, line, function, source in FRAMES:
        full = (job if where == "job" else stdlib) + sep + path.replace("/", sep)
        out += ['  File "%s", line %d, in %s' % (full, line, function), "    " + source]
    return "\n".join(out + [ERROR]) + "\n"


def test_sysconfig_puts_windows_stdlib_in_lib():
    assert _nt_stdlib(r"C:\Python311") == r"C:\Python311\Lib"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_jobs_frame_is_blamed_under_every_layout(layout, tmp_path):
    job, stdlib, sep = LAYOUTS[layout]
    log = tmp_path / "job.log"
    log.write_text(_log(job, stdlib, sep), encoding="utf-8")
    result = command.explain([str(log)])
    first = result.findings[0]
    assert first.signature.id == "program.exception"
    assert first.exception.culprit == (job + sep + "data.py", 12, "load")
    assert "not in the environment" in first.signature.cause
