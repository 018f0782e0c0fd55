"""Every recipe in the README and docs/ works as written.

The commands are read out of the documents themselves, so a recipe cannot rot: every
`pip install` pins torch and installs envcheck from what a user has (a clone: envcheck is
not on PyPI yet, docs/install.md), every `envcheck ...` line parses with today's
options, the README's two blocks (run, tests) run as pasted in a fresh copy of the
clone, and the GitHub Actions workflow of the README and docs/ci.md runs here step by
step, in a fresh venv, and exits 0.
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
DISTRIBUTION = "torch-envcheck"  # its name once published; not on PyPI yet
CLONE_IN_CI = "./envcheck"  # where the CI workflows check the team's clone out


def blocks(kinds=None):
    """(document, language, text) of every fenced code block."""
    for path in DOCS:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in FENCE.finditer(text):
            if kinds is None or m.group(1) in kinds:
                yield os.path.relpath(path, ROOT), m.group(1), m.group(2)


def shell_lines(text):
    """Logical lines: continuations joined, a leading '$ ' prompt and YAML's '- run:'
    taken off."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        line = re.sub(r"^(\$ |- run: |run: )", "", line)
        out.append(line)
    return out


def pip_installs():
    """(document, the pip command) of every `pip install` in a code block."""
    for doc, _, text in blocks():
        for line in shell_lines(text):
            for m in re.finditer(r"pip install ([^&|;#>]*)", line):
                yield doc, m.group(0).strip()


def test_every_pip_install_pins_torch_and_installs_envcheck_from_what_exists():
    seen = list(pip_installs())
    assert len(seen) > 5
    for doc, command in seen:
        words = [w.strip("'\"") for w in shlex.split(command)[2:]]
        for w in words:
            if re.match(r"torch(\[|[<>=!~]|$)", w):
                assert "==" in w, "%s: an unpinned torch: %s" % (doc, command)
            # PyPI's "envcheck" is an unrelated project
            assert not re.fullmatch(r"envcheck(\[.*\])?([<>=!~].*)?", w), (doc, command)
            # not on PyPI: by its name only from an internal index, or from git
            if re.fullmatch(r"%s(\[.*\])?([<>=!~].*)?" % DISTRIBUTION, w):
                assert "--index-url" in words, "%s: not on PyPI: %s" % (doc, command)
    clones = [c for _, c in seen if re.search(r"pip install (numpy )?(\.|%s|/path/to/"
                                              r"envcheck)( |$)" % re.escape(CLONE_IN_CI), c)]
    assert len(clones) >= 4, clones
    with open(os.path.join(ROOT, "docs", "install.md"), encoding="utf-8") as f:
        install = f.read()
    assert "**envcheck is not on PyPI yet.**" in install
    assert "dev/check_package.sh" in install and "twine upload" in install


def test_the_cli_and_the_zipapp_say_how_to_install_from_a_clone():
    with open(os.path.join(ROOT, "envcheck", "cli.py"), encoding="utf-8") as f:
        cli = f.read()
    assert "pip install \"\n              \"/path/to/envcheck (docs/install.md" in cli
    assert "pip install %s" % DISTRIBUTION not in cli and "pip install envcheck" not in cli
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert 'name = "%s"' % DISTRIBUTION in f.read()


def readme_block(after):
    """The README's first code block after the line that holds ``after``."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return FENCE.search(text, text.index(after)).group(2).strip()


def test_docs_install_gives_the_readme_block_that_is_run_here():
    """docs/install.md's clone recipe is the README's first block, run by the test below."""
    with open(os.path.join(ROOT, "docs", "install.md"), encoding="utf-8") as f:
        install = f.read()
    assert readme_block("## Run it on a fresh machine") in [
        m.group(2).strip() for m in FENCE.finditer(install)]


@pytest.mark.ranks
def test_the_readme_blocks_run_as_pasted_in_a_clone(tmp_path):
    """The first hour: a fresh copy of the clone, and the README's two blocks pasted
    as they are, run and test block. The venv they make sees the torch of the tests'
    torch-only venv (a .pth file, so the pinned torch is "already satisfied" instead of a
    gigabyte copied); everything else is installed by the blocks themselves. The test
    block's whole suite is collected, not run (PYTEST_ADDOPTS): running it here would
    run this test again."""
    import glob as globs

    from conftest import torch_only_python

    run_block = readme_block("## Run it on a fresh machine")
    test_block = readme_block("## Run the tests on a fresh machine")
    assert run_block.endswith("pip install . && envcheck run"), run_block
    assert test_block.startswith("python3 -m venv .venv && . .venv/bin/activate"), test_block
    clone = tmp_path / "envcheck"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = os.path.join(ROOT, name)
        if os.path.isfile(src) and not os.path.islink(src):
            os.makedirs(clone / os.path.dirname(name), exist_ok=True)
            shutil.copy2(src, clone / name)
        elif os.path.islink(src):
            os.makedirs(clone / os.path.dirname(name), exist_ok=True)
            os.symlink(os.readlink(src), clone / name)
    subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
    base = os.path.dirname(os.path.dirname(torch_only_python()))
    (site,) = globs.glob(str(clone / ".venv" / "lib" / "python*" / "site-packages"))
    (torch_site,) = globs.glob(os.path.join(base, "lib", "python*", "site-packages"))
    with open(os.path.join(site, "torch-only-venv.pth"), "w") as f:
        f.write(torch_site + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and
           not k.startswith(("PYTEST_", "ENVCHECK_"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(os.path.dirname(sys.executable)))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    said = {}
    for name, block, extra in (("run", run_block, {}),
                               ("tests", test_block, {"PYTEST_ADDOPTS": "--collect-only"})):
        proc = subprocess.run(["bash", "-c", block], cwd=str(clone), env=dict(env, **extra),
                              capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, "%s\n%s\n%s" % (block, proc.stdout[-3000:],
                                                     proc.stderr[-3000:])
        said[name] = proc.stdout
    assert "✓ Ready for distributed training: backend gloo, 2 ranks" in said["run"], said["run"]
    assert "nothing unexpected: " in said["run"]
    collected = re.search(r"^(\d+) tests collected", said["tests"], re.M)
    assert collected and int(collected.group(1)) > 500, said["tests"][-2000:]


def envcheck_commands():
    """(document, argv) of every `envcheck ...` command line in a code block, up to the
    first shell operator."""
    for doc, lang, text in blocks():
        # a block that shows a screen: only its '$ ' lines are commands
        prompted = re.search(r"^\$ ", text, re.M)
        for raw, line in zip(text.replace("\\\n", " ").splitlines(), shell_lines(text)):
            if prompted and not raw.strip().startswith("$ "):
                continue
            # a command, not a screen's first line ('envcheck 0.1.0 · …', 'envcheck: …')
            if not re.match(r"(envcheck|python3? -m envcheck) [a-z][a-z-]*( |$)", line):
                continue
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            argv = []
            for w in words[1 if words[0] == "envcheck" else 3:]:
                if w in ("|", "||", "&&", ";", ">", ">>", "2>&1") or w.startswith(">"):
                    break
                argv.append(w)
            if argv and argv[0] not in ("…", "..."):
                yield doc, argv


def test_every_documented_envcheck_command_parses():
    """Each documented command line names a command and options that exist (parsed as
    the CLI would, nothing run)."""
    import typer

    from envcheck.cli import app

    group = typer.main.get_command(app)
    seen = list(envcheck_commands())
    assert len(seen) > 20
    for doc, argv in seen:
        command = group.commands.get(argv[0])
        assert command is not None, "%s: no command %r: envcheck %s" % (doc, argv[0],
                                                                         " ".join(argv))
        args = [a for a in argv[1:] if a not in ("...", "…")]
        try:
            command.make_context("envcheck " + argv[0], args, parent=None)
        except Exception as exc:  # noqa: BLE001 - the message names the bad option
            pytest.fail("%s: envcheck %s: %s" % (doc, " ".join(argv), exc))


def workflow_steps(doc):
    """The shell of every `run:` step of the GitHub Actions YAML in ``doc``."""
    steps = []
    for d, lang, text in blocks(("yaml",)):
        if d != doc:
            continue
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^(\s*)(?:- )?run: (.*)$", lines[i])
            i += 1
            if not m:
                continue
            if m.group(2).strip() != "|":
                steps.append(m.group(2).strip())
                continue
            body, indent = [], None
            while i < len(lines) and (not lines[i].strip() or indent is None or
                                      lines[i].startswith(indent)):
                if indent is None:
                    indent = re.match(r"^\s*", lines[i]).group(0)
                    if len(indent) <= len(m.group(1)):
                        break
                body.append(lines[i][len(indent):])
                i += 1
            steps.append("\n".join(body))
    return steps


@pytest.mark.parametrize("doc", ["README.md", "docs/ci.md"])
def test_the_ci_workflow_installs_pinned_torch_numpy_and_envcheck(doc):
    steps = workflow_steps(doc)
    shell = "\n".join(steps)
    assert re.search(r'pip install "torch==\d+\.\d+\.\d+" --index-url '
                     r'https://download\.pytorch\.org/whl/cpu', shell), shell
    assert re.search(r"pip install .*\bnumpy\b", shell), "numpy: DCP and object collectives"
    assert re.search(r"pip install .*%s\b" % re.escape(CLONE_IN_CI), shell)
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        assert "with: {repository: your-org/envcheck, path: envcheck}" in f.read()
    assert "envcheck run --json envcheck.json --junit envcheck.xml --format markdown" in \
        " ".join(shell.replace("\\\n", " ").split())


@pytest.mark.ranks
def test_the_ci_workflow_runs_as_written_and_exits_0(tmp_path):
    """docs/ci.md's steps, run here in a fresh venv: the local torch wheel stands in for
    the PyTorch index, and this checkout for the team's clone of envcheck. The venv
    sees the torch of the tests' torch-only venv (a .pth file), so its pinned install is
    the pip step it is, without copying a gigabyte of torch again."""
    import glob as globs

    import torch

    from conftest import torch_only_python

    steps = workflow_steps("docs/ci.md")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    base = os.path.dirname(os.path.dirname(torch_only_python()))
    (site,) = globs.glob(str(venv / "lib" / "python*" / "site-packages"))
    (torch_site,) = globs.glob(os.path.join(base, "lib", "python*", "site-packages"))
    with open(os.path.join(site, "torch-only-venv.pth"), "w") as f:
        f.write(torch_site + "\n")
    env = dict(os.environ, PATH="%s%s%s" % (venv / "bin", os.pathsep, os.environ["PATH"]),
               VIRTUAL_ENV=str(venv), GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    for k in ("PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    version = torch.__version__.split("+")[0]
    said = []
    for step in steps:
        step = re.sub(r'"torch==[\d.]+"', '"torch==%s"' % version, step)
        step = step.replace(" --index-url https://download.pytorch.org/whl/cpu", "")
        step = step.replace(CLONE_IN_CI, shlex.quote(ROOT))
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=str(tmp_path),
                              env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, "%s\n%s\n%s" % (step, proc.stdout, proc.stderr[-3000:])
        said.append(proc.stdout)
    assert "Requirement already satisfied: torch==%s" % version in said[0] or \
        "Requirement already satisfied: torch" in said[0], said[0]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## envcheck: ✅ distributed PyTorch works here"), summary[:300]
    assert "UNEXPECTED" not in summary
    assert (tmp_path / "envcheck.xml").exists() and (tmp_path / "envcheck.json").exists()


def test_the_zipapp_builds_with_the_stdlib_and_runs_check(tmp_path):
    """docs/cluster.md's single-file build: nothing to install, and the file runs `check`
    under a Python that has none of envcheck's dependencies on its path (-I -S)."""
    pyz = tmp_path / "envcheck.pyz"
    built = subprocess.run([sys.executable, os.path.join(ROOT, "dev", "build_zipapp.py"),
                            "-o", str(pyz)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    assert built.stdout.startswith("built %s (" % pyz) and "typer==" in built.stdout
    env = dict(os.environ, ENVCHECK_PYZ_ROOT=str(tmp_path / "cache"))
    env.pop("PYTHONPATH", None)
    res = subprocess.run([sys.executable, "-I", "-S", str(pyz), "check", "torch==2.4.1",
                          "--driver", "535.104.05", "--gpu", "sm_80"], capture_output=True,
                         text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1].startswith("✓ 2.4.1+cu121 will work here: pip install ")
    # what it cannot do, it says in one line, with the real distribution's name
    res = subprocess.run([sys.executable, "-I", "-S", str(pyz), "run"], capture_output=True,
                         text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1
    assert "install envcheck from its clone, pip install /path/to/envcheck" in res.stderr
