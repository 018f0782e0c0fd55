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


# The nvcc version check apex's setup.py started and many builds copied (vLLM's,
# flash-attn's, DeepSpeed's kernels), here as the copies that read CUDA_HOME themselves
# do (torch's cpp_extension.CUDA_HOME is None in a CPU build of torch)
NVCC_CHECK = '''
import os
import subprocess
cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
subprocess.check_output([cuda_home + "/bin/nvcc", "-V"], universal_newlines=True)
'''


def test_a_cuda_home_without_nvcc_is_the_missing_toolkit(tmp_path, matrix):
    """CUDA_HOME names a directory that holds no bin/nvcc (a runtime image, nvcc
    removed: pytorch/ignite#1710): the build takes it as the toolkit, its first call of
    nvcc fails, and the log says so in CPython's words only."""
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-c", NVCC_CHECK], cwd=tmp_path,
                          env=dict(os.environ, CUDA_HOME=str(home)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stdout
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last == "FileNotFoundError: [Errno 2] No such file or directory: '%s/bin/nvcc'" \
        % home, proc.stdout
    log = tmp_path / "job.log"
    log.write_text(proc.stdout, encoding="utf-8")
    result = command.explain([str(log)], matrix=matrix)
    assert [f.signature.id for f in result.findings][:1] == ["extension.cuda_home"]
    assert result.findings[0].line.shown == last
    # another program the build cannot find is not the toolkit (nothing is named: the
    # error is raised in the standard library, below a script given with -c)
    log.write_text(proc.stdout.replace("/bin/nvcc'", "/bin/envcheck-absent'"), encoding="utf-8")
    assert command.explain([str(log)], matrix=matrix).findings == []
