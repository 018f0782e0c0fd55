"""A real extension build that fails at its link (issue #34, phase T): torch's
cpp_extension builds a one-line C++ file with ninja and the system's compiler, asked to
link a library this machine lacks. GNU ld refuses it some lines above the build's
failure; explain reads the refusal into the failure's line.

The CUDA library (-lcurand, DeepSpeed's cpu_adam of deepspeedai/DeepSpeed#5659) is
cuda.library_missing; another library is no CUDA cause, and the program's error keeps
torch's own words. Both refusals are observed here, in the same test. .ci/run installs
the compiler and ninja where the machine lacks them, and requires them
(ENVCHECK_REQUIRE_BUILD=1); elsewhere the tests skip without them.
"""

import os
import shutil
import subprocess
import sys

import pytest

from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load

BUILD = '''
from torch.utils import cpp_extension
cpp_extension.load("probe_%(lib)s", ["probe.cpp"], extra_ldflags=["-l%(lib)s"],
                   build_directory=".", verbose=True)
'''


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def _failed_build(tmp_path, lib, matrix):
    """The output of a build linked with -l``lib``, as the job's log holds it."""
    absent = [tool for tool in ("c++", "ninja") if shutil.which(tool) is None]
    if absent:
        if os.environ.get("ENVCHECK_REQUIRE_BUILD") == "1":
            raise RuntimeError("%s not on PATH: .ci/run installs them" % " and ".join(absent))
        pytest.skip("%s not on PATH (apt-get install g++ ninja-build; CI installs them)"
                    % " and ".join(absent))
    (tmp_path / "probe.cpp").write_text("int envcheck_probe() { return 1; }\n")
    proc = subprocess.run([sys.executable, "-c", BUILD % {"lib": lib}], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "cannot find -l%s" % lib in proc.stdout, proc.stdout[-3000:]
    assert proc.stdout.rstrip().endswith("RuntimeError: Error building extension 'probe_%s'"
                                         % lib)
    log = tmp_path / "build.log"
    log.write_text(proc.stdout, encoding="utf-8")
    return command.explain([str(log)], matrix=matrix)


def test_a_cuda_library_the_linker_cannot_find_is_the_missing_library(tmp_path, matrix):
    result = _failed_build(tmp_path, "curand", matrix)
    assert [f.signature.id for f in result.findings] == ["cuda.library_missing"]
    first = result.findings[0]
    assert first.line.shown == ("subprocess.CalledProcessError: Command '['ninja', '-v']' "
                                "returned non-zero exit status 1.")
    assert "LIBRARY_PATH, which the linker reads" in first.signature.advice


def test_another_library_the_linker_cannot_find_is_no_cuda_cause(tmp_path, matrix):
    result = _failed_build(tmp_path, "envcheckabsent", matrix)
    found = [f.signature.id for f in result.findings]
    assert "cuda.library_missing" not in found
    assert found[:1] == ["program.exception"]
    assert result.findings[0].exception.message == ("Command '['ninja', '-v']' returned "
                                                    "non-zero exit status 1.")
