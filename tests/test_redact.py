"""Secrets by value: every format is replaced, and text that holds none passes through
untouched (the quick test that spares most strings the substitutions skips none)."""

import json
import os

from conftest import ROOT
from envcheck.core import redact

EVIDENCE = os.path.join(ROOT, "envcheck", "matrix", "data", "evidence")

SECRETS = [
    ("clone https://alice:s3cr3tPass@github.com/org/repo.git", "s3cr3tPass"),
    ("WANDB password = 'hunter2hunter2'", "hunter2hunter2"),
    ("export HF token:abcdef123456", "abcdef123456"),
    ("Api-Key=QWERTYUIOP0987", "QWERTYUIOP0987"),
    ("github: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2"),
    ("pat github_pat_" + "11AAAA_bbbbCCCCddddEEEEffff", "github_pat_11AAAA_bbbbCCCCddddEEEEffff"),
    ("hub hf_" + "AbCdEfGhIjKlMnOpQrStUv", "hf_AbCdEfGhIjKlMnOpQrStUv"),
    ("slack xoxb-" + "1234567890-abcdef", "xoxb-1234567890-abcdef"),
    ("aws AKIA" + "ABCDEFGHIJKLMNOP end", "AKIAABCDEFGHIJKLMNOP"),
    ("aws ASIA" + "QRSTUVWXYZ234567", "ASIAQRSTUVWXYZ234567"),
    ("openai sk-" + "proj_abcdefghijklmnopqrstuv", "sk-proj_abcdefghijklmnopqrstuv"),
    ("gitlab glpat-" + "abcdefghij_KLMNOPQRST", "glpat-abcdefghij_KLMNOPQRST"),
    ("jwt eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4", "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4"),
]


def test_every_format_is_replaced():
    for line, secret in SECRETS:
        out = redact.text(line)
        assert secret not in out and redact.REDACTED in out, (line, out)


def _every_pattern(value):
    for pattern, replacement in redact._VALUES:
        value = pattern.sub(replacement, value)
    return value


def test_the_quick_test_skips_no_text_a_pattern_would_change(tmp_path):
    """Against the nine substitutions applied to everything: a real report's strings, the
    secrets above, and each secret cut down around its trigger."""
    samples = [line for line, _ in SECRETS]
    for line, secret in SECRETS:
        for cut in range(1, len(secret)):
            samples += [secret[:cut], secret[cut:], line.replace(secret, secret[cut:])]
    with open(os.path.join(EVIDENCE, sorted(os.listdir(EVIDENCE))[0]), encoding="utf-8") as f:
        report = json.load(f)
    stack = [report]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            samples.append(value)
    assert len(samples) > 500
    for value in samples:
        assert redact.text(value) == _every_pattern(value), value

