"""matrix.signatures: [[signature]] entries are validated with the rest of the matrix,
every problem at once with its file and entry, and advice_from resolves to the advice of
a check's expected failure (one text, never a copy)."""

import pytest

from envcheck.matrix import load as matrix_load, signatures
from test_matrix import write


BAD = """\
[[signature]]
id = "team.ok"
cause = "fine"
match = ["RuntimeError: fine"]
advice = "nothing"
source = "x"

[[signature]]
id = "Not An Id"
cause = "x"

[[signature]]
id = "team.no_word"
cause = "x"
match = ["all lower case, never scanned"]
advice = "x"
source = "x"

[[signature]]
id = "team.bad_regex"
cause = "x"
match = ["Error (unbalanced"]
advice = "x"
source = "x"
colour = "blue"

[[signature]]
id = "team.both"
cause = "x"
match = ["Error: both"]
advice = "x"
advice_from = "serialization.pickle_default_group"
source = "x"

[[signature]]
id = "team.no_advice"
cause = "x"
match = ["Error: none"]
source = "x"
caught_by = ["launch.nope"]

[[signature]]
id = "team.passing_check"
cause = "x"
match = ["Error: passing"]
advice_from = "launch.env"
source = "x"

[[signature]]
id = "team.differ_without_group"
cause = "x"
match = ["NCCL version \\\\d+"]
differ = true
advice = "x"
source = "x"

[[signature]]
id = "team.needs_nothing"
cause = "x"
match = ["Error: needy"]
needs = ["team.nowhere"]
advice = "x"

[[signature]]
id = "team.ok"
cause = "again"
match = ["RuntimeError: again"]
advice = "x"
source = "x"
"""


def test_every_signature_error_is_reported_with_its_entry(tmp_path):
    write(tmp_path, "signatures/team.toml", BAD)
    with pytest.raises(matrix_load.MatrixError) as info:
        matrix_load.load([str(tmp_path)])
    errors = [e for e in info.value.errors if "team.toml" in e]
    expected = {
        2: "id must be a dotted lower-case name",
        3: "holds none of the words the log scan looks for",
        4: "is not a regular expression",
        5: "give advice or advice_from",
        6: "probe 'launch' has no check 'nope'",
        7: "no expected failure of that check has advice",
        8: "differ = true needs a group",
        9: "source is required",
        10: "already defined",
    }
    for index, fragment in expected.items():
        assert any("signature #%d:" % index in e and fragment in e for e in errors), \
            (index, fragment, errors)
    assert any("signature #4:" in e and "unknown key 'colour'" in e for e in errors)
    assert any("signature #6:" in e and "give advice or advice_from" in e for e in errors)
    assert any("signature #9:" in e and "needs 'team.nowhere'" in e for e in errors)
    assert not any("signature #1:" in e for e in errors)
    # line numbers point at the [[signature]] header
    assert any(":8: signature #2:" in e for e in errors), errors


def test_advice_from_is_the_expected_failures_advice_and_framework_words():
    matrix = matrix_load.load()
    by_id = {s.id: s for s in matrix.signatures}
    by_check = {}
    for e in matrix.expectations:
        for c in e.checks:
            if e.expects_failure and e.advice:
                by_check[c] = e
    for s in matrix.signatures:
        if s.advice_from:
            e = by_check[s.advice_from]
            assert (s.advice, s.framework_advice) == (e.advice, e.framework_advice)
    assert by_id["torch.weights_only_load"].advice_from == "checkpoint.default_load"


def test_every_builtin_pattern_holds_a_scan_word_and_a_source():
    for s in matrix_load.load().signatures:
        assert s.source and s.cause and s.advice
        for p in s.patterns:
            assert any(w in p.pattern for w in signatures.SCAN_WORDS), (s.id, p.pattern)


def test_a_team_override_of_the_expected_failure_keeps_the_signatures_advice(tmp_path):
    # test_matrix's patched build: pickling passes there, but other people's logs still
    # show the failure, and its signature keeps the built-in advice.
    write(tmp_path, "expectations/serialization.toml", """\
        [[expectation]]
        check = ["serialization.pickle_default_group", "serialization.deepcopy_module_with_group"]
        torch = ">=2.1"
        outcome = "passed"
        source = "our patched build"
    """)
    builtin = {s.id: s for s in matrix_load.load().signatures}
    team = {s.id: s for s in matrix_load.load([str(tmp_path)]).signatures}
    assert team["torch.pickle_process_group"].advice == builtin["torch.pickle_process_group"].advice
    assert team["torch.pickle_process_group"].advice.startswith("do not deepcopy")


def test_the_architectures_nvcc_refuses_are_said_as_the_toolkits_list_them():
    """extension.arch_unsupported names when toolkits gained and dropped architectures:
    each must be what cuda.toml's toolkits hold (the first that lists it, the first that
    no longer does), so the words cannot drift from the facts."""
    import re
    m = matrix_load.load()
    toolkits = [t for t in m.toolkits if "archs" not in t.unconfirmed]

    def first(arch, listed):
        return next(t.version for t in toolkits
                    if (arch in t.archs) == listed and (listed or any(
                        arch in u.archs for u in toolkits[:toolkits.index(t)])))
    cause = next(s for s in m.signatures if s.id == "extension.arch_unsupported").cause
    came = re.search(r"\((sm_89) and (sm_90) came with CUDA ([\d.]+), (sm_100) and (sm_120) "
                     r"with ([\d.]+)\)", cause)
    went = re.search(r"\((sm_35) and (sm_37) in CUDA ([\d.]+), (sm_50) to (sm_72) in "
                     r"([\d.]+)\)", cause)
    assert came and went, cause
    for a, b, version in (came.group(1, 2, 3), came.group(4, 5, 6)):
        assert first(a, True) == first(b, True) == version, (a, b)
    assert first(went.group(1), False) == first(went.group(2), False) == went.group(3)
    # "sm_50 to sm_72": every architecture between them went in the same release
    between = ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72")
    assert {first(x, False) for x in between} == {went.group(6)}
