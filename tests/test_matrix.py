"""The matrix: version matching rules, validation with file+entry, --matrix overrides,
and the `envcheck matrix` command. No torch run here: these are fast."""

import os
import textwrap

import pytest
from packaging.version import Version

from conftest import run_cli
from envcheck.matrix import load as matrix_load, versions
from envcheck.matrix.values import Target

# (range, torch version, matches?) — the documented rules in versions.py / docs/matrix.md.
MATCHING = [
    (">=2.1,<2.4", "2.1.2", True),
    (">=2.1,<2.4", "2.4.0", False),
    # local tags are not part of the version
    ("==2.4.1", "2.4.1+cu124", True),
    ("<=2.4.1", "2.4.1+cpu", True),
    (">2.4.1", "2.4.1+cu121", False),
    (">=2.5,<2.6", "2.5.1+cu124", True),
    # a nightly or rc counts as the release it leads to (plain PEP 440 says False to both)
    (">=2.5,<2.6", "2.6.0.dev20241001", False),
    (">=2.6", "2.6.0.dev20241001", True),
    (">=2.6", "2.6.0.dev20241001+cu124", True),
    ("<2.6", "2.6.0rc1", False),
    ("==2.6.0", "2.6.0rc1", True),
    (">=1.13", "2.16.0.dev20261101", True),
    # a range that names a pre-release is matched as PEP 440 says
    (">=2.6.0.dev20241015", "2.6.0.dev20241001", False),
    (">=2.6.0.dev20241015", "2.6.0.dev20241020", True),
    (">=2.6.0.dev20241015", "2.6.0", True),
    ("~=2.4.0", "2.4.1", True),
    ("==2.4.*", "2.4.1+cu118", True),
]


@pytest.mark.parametrize("spec, version, expected", MATCHING)
def test_torch_range_matching(spec, version, expected):
    assert versions.torch_in(versions.parse_specifier(spec), version) is expected


def test_packaging_alone_would_miss_nightlies():
    # Why the rule exists: see the STYLE reference on packaging.
    from packaging.specifiers import SpecifierSet
    assert "2.6.0.dev1" not in SpecifierSet(">=2.5,<2.6")
    assert Version("2.6.0+cu124").local == "cu124"


@pytest.mark.parametrize("torch, cuda, hip, variant", [
    ("2.4.1", "12.1", None, "cu121"),          # PyPI build: no local tag
    ("2.4.1+cu124", "12.4", None, "cu124"),
    ("2.13.0+cpu", None, None, "cpu"),
    ("2.6.0.dev20241001+cu126", "12.6", None, "cu126"),
    ("2.5.1", None, None, "cpu"),
    ("2.5.1", None, "6.2.41133", "rocm6.2"),
])
def test_observed_variant(torch, cuda, hip, variant):
    assert versions.observed_variant(torch, cuda, hip) == variant


def test_series_of_nightly_and_local():
    assert versions.series("2.6.0.dev20241001") == "2.6"
    assert versions.series("2.4.1+cu124") == "2.4"


@pytest.fixture(scope="module")
def builtin():
    return matrix_load.load()


def test_builtin_matrix_is_valid_and_covers_the_releases(builtin):
    series = [r.series for r in builtin.releases]
    assert series[0] == "1.13" and series[-1] == "2.15"
    r = builtin.release("2.4.1+cu124")
    assert r.default_variant == "cu121"
    assert r.variant("cu124").archs[-1] == "sm_90"
    assert builtin.toolkit("12.4").compat_driver == "525.60.13"
    assert builtin.release("2.6.0.dev20241001").series == "2.6"
    # 2.6 cu126 moved to manylinux 2.28 (FACTS.md section 4)
    r26 = builtin.release("2.6.0")
    assert r26.glibc_for(r26.variant("cu126")) == "2.28"
    assert r26.glibc_for(r26.variant("cu124")) == "2.17"


def test_builtin_expectations_cite_evidence(builtin):
    assert builtin.expectations
    for e in builtin.expectations:
        assert e.source or e.observed, e.where
        for o in e.observed:
            assert o.evidence and os.path.isfile(os.path.join(
                matrix_load.BUILTIN_DIR, "expectations", o.evidence)), e.where


def test_expectations_apply_to_nightlies_and_local_tags(builtin):
    nightly = Target(Version("2.16.0.dev20261101"), "cu132", "3.12.1", "linux", "gloo")
    issues = {c for e in builtin.known_issues(nightly) for c in e.checks}
    assert "serialization.pickle_default_group" in issues


def test_matrix_symlink_points_into_the_package():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    link = os.path.join(root, "matrix")
    assert os.path.islink(link)
    assert os.path.realpath(link) == os.path.realpath(matrix_load.BUILTIN_DIR)


# ---- validation: every error, with its file and entry ---------------------------------

def write(directory, name, text):
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


BAD_ENTRIES = """\
    [[expectation]]
    check = "launch.device"
    torch = ">=2.1"
    outcome = "passed"
    source = "fine"

    [[expectation]]
    check = "launch.no_such_check"
    torch = ">=2.1"
    outcome = "passed"
    source = "x"

    [[expectation]]
    check = "checkpointz.save"
    torch = ">=2.1"
    outcome = "passed"
    source = "x"

    [[expectation]]
    check = "launch.unique_device"
    torch = "=>2.1"
    outcome = "passed"
    source = "x"

    [[expectation]]
    check = "launch.slurm"
    torch = ">=2.1"
    outcome = "failed"
    message = "unbalanced (paren"
    source = "x"

    [[expectation]]
    check = "launch.slurm"
    torch = ">=2.1"
    outcome = "exploded"
    colour = "blue"

    [[expectation]]
    check = "launch.device"
    torch = "<2.2"
    variants = ["cu121"]
    outcome = "failed"
    advice = "a contradiction for 2.1.x cu121"
    source = "x"
"""


def test_every_error_is_reported_with_file_and_entry(tmp_path):
    write(tmp_path, "team.toml", BAD_ENTRIES)
    write(tmp_path, "broken.toml", "[[expectation]\ncheck = 1\n")
    with pytest.raises(matrix_load.MatrixError) as info:
        matrix_load.load([str(tmp_path)])
    errors = info.value.errors
    text = "\n".join(errors)
    assert "broken.toml: malformed TOML" in text
    expected = {
        2: "probe 'launch' has no check 'no_such_check'",
        3: "unknown probe 'checkpointz'",
        4: "is not a version range",
        5: "is not a regular expression",
        6: "outcome exploded",
        7: "contradicts",
    }
    for index, fragment in expected.items():
        hits = [e for e in errors if "team.toml:" in e and "expectation #%d:" % index in e
                and fragment in e]
        assert hits, (index, fragment, text)
    assert any("expectation #6" in e and "unknown key 'colour'" in e for e in errors)
    assert any("expectation #5" in e and "advice is required" in e for e in errors)
    assert any("expectation #6" in e and "needs evidence" in e for e in errors)
    # line numbers point at the [[expectation]] header of the entry
    assert any(":7: expectation #2:" in e for e in errors), text
    assert not any("expectation #1:" in e for e in errors)


def test_cli_validate_lists_every_error_and_exits_2(tmp_path):
    write(tmp_path, "team.toml", BAD_ENTRIES)
    res = run_cli("matrix", "--validate", "--matrix", str(tmp_path))
    assert res.code == 2, res
    assert "Traceback" not in res.stderr
    assert "the matrix has 9 errors" in res.stderr
    lines = res.stderr.splitlines()[1:]
    assert len(lines) == 9 and all("team.toml:" in line for line in lines)


def test_cli_validate_ok():
    res = run_cli("matrix", "--validate")
    assert res.code == 0, res.stderr
    assert res.stdout.startswith("matrix OK: 17 releases")


def test_bad_release_and_cuda_entries(tmp_path):
    write(tmp_path, "releases-extra.toml", """\
        [[release]]
        torch = "2.4"
        patches = ["2.5.0"]
        python = ["3.11"]
        default = "cu999"
        glibc = "2.17"
        source = "x"
        [release.variants.cu126]
        cuda = "12.6"
        archs = ["sm_80", "80"]

        [[cuda]]
        version = "12.4"
        compat_driver = "five"
        source = "x"
    """)
    with pytest.raises(matrix_load.MatrixError) as info:
        matrix_load.load([str(tmp_path)])
    text = "\n".join(info.value.errors)
    assert "patch 2.5.0 belongs to another series" in text
    assert "default 'cu999' is not one of its variants" in text
    assert "arch '80' is not sm_XY" in text
    assert "release 2.4 is already defined at" in text
    assert "CUDA 12.4 is already defined at" in text
    assert "compat_driver 'five' is not a dotted version" in text


def test_override_by_file_name_replaces_the_builtin_file(tmp_path):
    # A team that fixed the pickling (say, a patched torch) overrides the built-in file;
    # without the override this entry would contradict serialization.toml.
    write(tmp_path, "expectations/serialization.toml", """\
        [[expectation]]
        check = "serialization.pickle_default_group"
        torch = ">=2.1"
        outcome = "passed"
        source = "our patched build"
    """)
    m = matrix_load.load([str(tmp_path)])
    entries = [e for e in m.expectations if "serialization.pickle_default_group" in e.checks]
    assert len(entries) == 1 and entries[0].expects_pass
    assert [f.builtin for f in m.files if f.name == "expectations/serialization.toml"] == [False]


def test_added_file_that_contradicts_a_builtin_one_is_an_error(tmp_path):
    write(tmp_path, "ours.toml", """\
        [[expectation]]
        check = "serialization.pickle_default_group"
        torch = "==2.4.1"
        outcome = "passed"
        source = "our patched build"
    """)
    with pytest.raises(matrix_load.MatrixError) as info:
        matrix_load.load([str(tmp_path)])
    (error,) = info.value.errors
    assert "ours.toml:1: expectation #1: contradicts" in error
    assert "expectations/serialization.toml" in error and "2.4.1" in error


def test_disjoint_conditions_do_not_contradict(tmp_path):
    write(tmp_path, "ours.toml", """\
        [[expectation]]
        check = "collectives.all_reduce"
        torch = ">=2.1"
        variants = ["cu121"]
        outcome = "failed"
        advice = "x"
        source = "x"

        [[expectation]]
        check = "collectives.all_reduce"
        torch = ">=2.1"
        cuda = ">=12.4"
        outcome = "failed"
        advice = "y"
        source = "y"

        [[expectation]]
        check = "collectives.barrier"
        torch = "<2.1"
        outcome = "failed"
        advice = "x"
        source = "x"
    """)
    write(tmp_path, "expectations/baseline.toml", """\
        [[expectation]]
        check = "collectives.barrier"
        torch = ">=2.1"
        outcome = "passed"
        source = "x"
    """)
    m = matrix_load.load([str(tmp_path)])
    assert len([e for e in m.expectations if "collectives.all_reduce" in e.checks]) == 2


def test_check_of_a_probe_not_written_yet_is_an_error_until_it_exists(tmp_path):
    write(tmp_path, "future.toml", """\
        [[expectation]]
        check = "futureprobe.works"
        torch = ">=2.1"
        outcome = "passed"
        source = "x"
    """)
    with pytest.raises(matrix_load.MatrixError, match="unknown probe 'futureprobe'"):
        matrix_load.load([str(tmp_path)])
    probe = tmp_path / "future_probe.py"
    probe.write_text("def probe_futureprobe(ctx):\n    with ctx.check('works'):\n"
                     "        pass\n")
    matrix_load.load([str(tmp_path)], [str(probe)])
    res = run_cli("matrix", "--validate", "--matrix", str(tmp_path), "--probe-path", str(probe))
    assert res.code == 0, res.stderr


def test_missing_matrix_dir_is_one_line_exit_2(tmp_path):
    res = run_cli("matrix", "--matrix", str(tmp_path / "nope"))
    assert res.code == 2
    assert res.stderr.strip().count("\n") == 0
    assert "no such directory" in res.stderr


# ---- envcheck matrix: filters ---------------------------------------------------------

def test_matrix_filters_by_torch_version():
    res = run_cli("matrix", "--torch", "2.4.1")
    assert res.code == 0, res.stderr
    assert "cu118 cu121* cu124" in res.stdout
    assert "Builds of 2.4" in res.stdout and "NCCL 2.20.5" in res.stdout
    assert "\n2.5 " not in res.stdout and "\n1.13 " not in res.stdout


def test_matrix_filters_by_cuda_and_check():
    res = run_cli("matrix", "--cuda", "12.4")
    assert res.code == 0, res.stderr
    assert "550.54.14" in res.stdout and "560.28.03" not in res.stdout
    assert "cu124" in res.stdout and "cu121" not in res.stdout
    res = run_cli("matrix", "--check", "serialization.pickle_default_group")
    assert res.code == 0, res.stderr
    assert "serialization.pickle_default_group" in res.stdout
    assert "collectives" not in res.stdout and "Releases" not in res.stdout


def test_matrix_filter_errors():
    res = run_cli("matrix", "--torch", "9.9")
    assert res.code == 2 and "knows releases 1.13" in res.stderr
    res = run_cli("matrix", "--check", "nope.nothing")
    assert res.code == 2 and "--check nope.nothing: no such check or probe" in res.stderr


def test_unsupported_needs_a_python_or_numpy_range_and_a_failure(tmp_path):
    write(tmp_path, "compat2.toml", """\
        [[expectation]]
        check = "collectives.barrier"
        torch = "<2.0"
        unsupported = true
        outcome = "failed"
        advice = "x"
        source = "x"

        [[expectation]]
        check = "collectives.barrier"
        torch = "<2.0"
        python = ">=3.11"
        unsupported = true
        outcome = "passed"
        source = "x"

        [[expectation]]
        check = "collectives.barrier"
        torch = "<2.0"
        numpy = "not a range"
        outcome = "failed"
        advice = "x"
        source = "x"
    """)
    with pytest.raises(matrix_load.MatrixError) as info:
        matrix_load.load([str(tmp_path)])
    text = "\n".join(info.value.errors)
    assert "expectation #1: unsupported = true names a combination torch does not " \
           "support: give the python or numpy range it is about" in text
    assert "expectation #2: unsupported = true is for a failure (outcome is passed)" in text
    assert "expectation #3: " in text and "'not a range' is not a version range" in text


def test_matrix_says_which_releases_a_range_claims_without_a_run(tmp_path):
    write(tmp_path, "expectations/team.toml", """\
        [[expectation]]
        check = "launch.slurm"
        torch = ">=2.1,<2.7"
        outcome = "passed"
        observed = [
          {torch = "2.1.2+cu121", envcheck = "0.1.0", date = "2026-11-23"},
          {torch = "2.4.1+cu121", envcheck = "0.1.0", date = "2026-11-23"},
        ]
    """)
    res = run_cli("matrix", "--check", "launch.slurm", "--matrix", str(tmp_path),
                  env={"COLUMNS": "200"})
    assert res.code == 0, res.stderr
    assert "not observed: 2.2-2.3, 2.5-2.6" in res.stdout


def test_per_patch_tags_and_product_floors_are_validated(tmp_path):
    write(tmp_path, "extra.toml", """\
        [[release]]
        torch = "3.0"
        patches = ["3.0.0", "3.0.1"]
        python = ["3.12", "3.13t"]
        default = "cpu"
        glibc = "2.28"
        source = "x"
        [release.variants.cpu]
        [release.per_patch."3.0.1"]
        python = ["3.12", "three"]
        [release.per_patch."3.0.9"]
        python = ["3.12"]
        source = "x"

        [[gpu_product]]
        product = "HGX X1"
        match = "X1("
        min_driver = "600.1"
        source = "x"

        [[gpu_product]]
        product = "HGX X2"
        match = "X2"
        min_driver = "six hundred"
        source = "x"
    """)
    with pytest.raises(matrix_load.MatrixError) as info:
        matrix_load.load([str(tmp_path)])
    text = "\n".join(info.value.errors)
    assert "release 3.0 per_patch 3.0.1: python 'three' is not a Python version" in text
    assert "release 3.0 per_patch 3.0.1: source is required" in text
    assert "release 3.0 per_patch 3.0.9: not one of its patches (3.0.0, 3.0.1)" in text
    assert "HGX X1: match 'X1(' is not a regular expression" in text
    assert "HGX X2: min_driver 'six hundred' is not a driver version" in text


def test_builtin_per_patch_and_product_facts(builtin):
    r = builtin.release("2.12.1")
    assert "3.13t" in r.python_for("2.12.0") and "3.13t" not in r.python_for("2.12.1")
    assert r.patch_facts("2.12.1").source
    b200 = builtin.node.product_floor("NVIDIA B200")
    assert (b200.product, b200.min_driver) == ("HGX B200", "570.133.20")
    assert builtin.node.product_floor("NVIDIA GB200") is None
    res = run_cli("matrix", "--torch", "2.12.1")
    assert "2.12.1 wheels: Python 3.10 3.11 3.12 3.13 3.14 3.14t (source: PyPI" in res.stdout
