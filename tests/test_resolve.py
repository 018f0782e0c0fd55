"""preinstall/resolve.py: the release and build pip would install on a node, and why
newer ones were skipped. Pure functions over the built-in matrix; no pip, no network
(dev/pip_agree.py compares these answers with pip's own resolver)."""

import pytest
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag

from envcheck.matrix.load import load
from envcheck.preinstall import resolve
from envcheck.preinstall.node import Node
from envcheck.preinstall.pins import PYPI


@pytest.fixture(scope="module")
def matrix():
    return load()


def node(python="3.11", glibc="2.35", system="Linux", machine="x86_64"):
    return Node(python, python, system, machine, glibc, None, ())


def chosen(matrix, spec, n, indexes=(PYPI,)):
    res = resolve.resolve(matrix, SpecifierSet(spec), indexes, n)
    return None if res.chosen is None else str(res.chosen.version)


# One right answer per node: (range, Python, glibc) -> what pip installs from PyPI.
@pytest.mark.parametrize("spec, python, glibc, expected", [
    (">=2.0", "3.11", "2.35", "2.15.0"),
    (">=2.0", "3.11", "2.17", "2.6.0"),      # 2.7+ are manylinux_2_28
    (">=2.0", "3.10", "2.35", "2.14.1"),     # 2.15 dropped 3.10
    (">=2.0", "3.10", "2.17", "2.6.0"),
    ("<2.5", "3.13", "2.35", None),          # cp313 wheels start with 2.5
    (">=2.3,<2.6", "3.13", "2.35", "2.5.1"),
    (">=2.0", "3.15", "2.35", "2.15.0"),
    (">=2.0", "3.16", "2.35", None),
    (">=2.0", "3.8", "2.35", "2.4.1"),       # 2.5 dropped 3.8
    (">=1.13", "3.7", "2.17", "1.13.1"),     # cp37m
    ("<2.0", "3.11", "2.12", "1.13.1"),      # manylinux1 (glibc 2.5) installs on 2.12
    (">=2.12", "3.13t", "2.35", "2.12.0"),   # 2.12.1 dropped cp313t
    (">=2.6,<2.7", "3.13t", "2.35", None),   # 2.6 has no cp313t on PyPI
    (">=2.7,<2.8", "3.13t", "2.35", "2.7.1"),
    (">=2.0", "3.14t", "2.35", "2.15.0"),
    ("==2.4", "3.11", "2.35", "2.4.0"),
])
def test_pip_choice(matrix, spec, python, glibc, expected):
    assert chosen(matrix, spec, node(python, glibc)) == expected


def test_skipped_releases_are_grouped_with_pip_like_reasons(matrix):
    res = resolve.resolve(matrix, SpecifierSet(">=2.0"), (PYPI,), node("3.10", "2.17"))
    assert [s.text for s in res.skipped] == [
        "2.15.0 skipped: no wheel for Python 3.10 (3.11–3.15, 3.14t, 3.15t)",
        "2.7.0–2.14.1 (12 versions) skipped: their wheels need glibc ≥ 2.28 "
        "(manylinux_2_28), this node has 2.17",
    ]
    assert [s.short for s in res.skipped] == ["no Python 3.10 wheel", "glibc 2.17 < 2.28"]
    assert str(res.newest.version) == "2.15.0" and str(res.chosen.version) == "2.6.0"


def test_releases_with_different_python_lists_that_all_lack_the_node_s_are_one_group(matrix):
    res = resolve.resolve(matrix, SpecifierSet(">=2.4"), (PYPI,), node("3.6"))
    assert res.chosen is None
    assert [s.text for s in res.skipped] == [
        "2.4.0–2.15.0 (18 versions) skipped: no wheel for Python 3.6"]


def test_free_threaded_node_accepts_only_free_threaded_wheels():
    free = resolve.node_tags("3.13t", "2.28")
    plain = resolve.node_tags("3.13", "2.28")
    assert Tag("cp313", "cp313t", "manylinux_2_28_x86_64") in free
    assert Tag("cp313", "cp313", "manylinux_2_28_x86_64") not in free
    assert Tag("cp313", "cp313t", "manylinux_2_28_x86_64") not in plain
    assert Tag("cp313", "cp313", "manylinux_2_28_x86_64") in plain


def test_node_platforms_follow_pep_600():
    old = resolve.node_platforms("2.17")
    assert old[0] == "manylinux_2_17_x86_64" and "manylinux2014_x86_64" in old
    assert "manylinux1_x86_64" in old and "manylinux_2_28_x86_64" not in old
    assert old[-1] == "linux_x86_64"
    assert resolve.node_platforms(None) == ("linux_x86_64",)  # musl: no manylinux


def test_wheel_tags_per_patch(matrix):
    release = matrix.release("2.12.0")
    assert "3.13t" in release.python_for("2.12.0")
    assert "3.13t" not in release.python_for("2.12.1")
    tags = resolve.wheel_tags(release, "2.12.1", release.variant("cu130"))
    assert Tag("cp314", "cp314t", "manylinux_2_28_x86_64") in tags
    assert not any(t.abi == "cp313t" for t in tags)
    old = matrix.release("2.6.0")
    assert resolve.wheel_platform(old, old.variant("cu124")) == "manylinux1"
    assert resolve.wheel_platform(old, old.variant("cu126")) == "manylinux_2_28"


def test_extra_index_local_version_beats_pypi_same_version(matrix):
    n = node()
    assert chosen(matrix, "==2.4.1", n, (PYPI, "cu118")) == "2.4.1+cu118"
    # ... but a higher PyPI version beats every build of the extra index
    assert chosen(matrix, ">=2.0", n, (PYPI, "cu118")) == "2.15.0"
    assert chosen(matrix, ">=2.0", n, ("cu118",)) == "2.7.1+cu118"


def test_a_variant_built_on_another_image_is_skipped_on_its_own(matrix):
    # 2.6.0 cu126 wheels are manylinux_2_28; 2.6.0 from PyPI (cu124) is manylinux1.
    n = node("3.11", "2.17")
    assert chosen(matrix, "==2.6.0", n, ("cu126",)) is None
    assert chosen(matrix, ">=2.5", n, ("cu126",)) is None
    assert chosen(matrix, "==2.6.0", n, (PYPI,)) == "2.6.0"


def test_musl_node_gets_no_manylinux_wheel(matrix):
    res = resolve.resolve(matrix, SpecifierSet(">=2.4"), (PYPI,), node(glibc=None))
    assert res.chosen is None
    assert {s.short for s in res.skipped} == {"no glibc"}


def test_not_linux_x86_64_is_not_judged(matrix):
    res = resolve.resolve(matrix, SpecifierSet(">=2.4"), (PYPI,),
                          node(system="Darwin", machine="arm64"))
    assert not res.judged_tags and str(res.chosen.version) == "2.15.0"


def test_nothing_in_range_is_none(matrix):
    assert resolve.resolve(matrix, SpecifierSet(">=3.0"), (PYPI,), node()) is None
    assert resolve.resolve(matrix, SpecifierSet("==2.4.1"), ("cu126",), node()) is None


def test_to_dict(matrix):
    res = resolve.resolve(matrix, SpecifierSet(">=2.12"), (PYPI,), node("3.13t"))
    d = res.to_dict()
    assert d["chosen"] == {"version": "2.12.0", "build": "2.12.0+cu130", "index": "pypi"}
    assert d["newest_in_range"]["version"] == "2.15.0"
    assert [(s["why"], s["versions"][-1], s["versions"][0]) for s in d["skipped"]] == [
        ("python", "2.12.1", "2.15.0")]
