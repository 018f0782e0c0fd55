"""docs/k8s/: the Kubernetes manifests that run envcheck's launcher mode over a gang,
validated offline against the published schemas of the versions they target
(tests/data/k8s/, made by dev/k8s_schemas.py: Kubernetes v1.33.0's Job and Service,
JobSet v0.12.0, Kubeflow Trainer v2.3.0), and their command lines read as Kubernetes
and torchrun would read them. No Kubernetes runs here: docs/kubernetes.md says what that
leaves untested."""

import copy
import glob
import gzip
import json
import os
import re

import jsonschema
import pytest
import yaml

from conftest import ROOT
from envcheck.worker import launched

SCHEMAS = os.path.join(ROOT, "tests", "data", "k8s")
MANIFESTS = sorted(glob.glob(os.path.join(ROOT, "docs", "k8s", "*.yaml")))
KINDS = {("batch/v1", "Job"): "job-batch-v1", ("v1", "Service"): "service-v1",
         ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset-jobset-v1alpha2",
         ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainjob-trainer-v1alpha1",
         ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"):
             "trainingruntime-trainer-v1alpha1"}


def schema(doc):
    with gzip.open(os.path.join(SCHEMAS, KINDS[(doc["apiVersion"], doc["kind"])]
                                + ".json.gz")) as f:
        return json.load(f)


def errors(doc):
    s = schema(doc)
    cls = jsonschema.validators.validator_for(s, default=jsonschema.Draft202012Validator)
    return sorted("%s: %s" % ("/".join(map(str, e.absolute_path)), e.message)
                  for e in cls(s).iter_errors(doc))


def documents():
    for path in MANIFESTS:
        with open(path, encoding="utf-8") as f:
            for i, doc in enumerate(yaml.safe_load_all(f)):
                yield "%s#%d" % (os.path.basename(path), i), doc


DOCS = list(documents())


def test_every_kind_shown_has_its_schema():
    assert {os.path.basename(p) for p in MANIFESTS} == {
        "envcheck-indexed-job.yaml", "envcheck-jobset.yaml", "envcheck-trainjob.yaml"}
    assert sorted({(d["apiVersion"], d["kind"]) for _, d in DOCS}) == sorted(KINDS)


@pytest.mark.parametrize("name,doc", DOCS, ids=[n for n, _ in DOCS])
def test_manifest_validates_against_its_published_schema(name, doc):
    assert errors(doc) == []


def _jobs(doc):
    """(replicated job name, JobSet name, Job spec) of every Job a manifest makes; for a
    plain Job (None, None, its spec). A TrainJob's JobSet is named after it."""
    if doc["kind"] == "Job":
        return [(None, None, doc["spec"])]
    if doc["kind"] == "JobSet":
        spec, jobset = doc["spec"], doc["metadata"]["name"]
    elif doc["kind"] == "TrainingRuntime":
        spec, jobset = doc["spec"]["template"]["spec"], "pretrain"
    else:
        return []
    return [(rj["name"], jobset, rj["template"]["spec"]) for rj in spec["replicatedJobs"]]


def _pod_specs(doc):
    return [job["template"]["spec"] for _, _, job in _jobs(doc)]


@pytest.mark.parametrize("name,doc", [(n, d) for n, d in DOCS if _pod_specs(d)],
                         ids=[n for n, d in DOCS if _pod_specs(d)])
def test_the_schemas_catch_what_a_person_gets_wrong(name, doc):
    for break_it, expected in (
            (lambda c: c.update(comand=c.pop("command", ["x"])), "'comand' was unexpected"),
            (lambda c: c.update(env="ENVCHECK_HOST=node1"), "is not of type 'array'"),
            (lambda c: c.update(ports=[{"port": 29500}]), "'containerPort' is a required")):
        broken = copy.deepcopy(doc)
        break_it(_pod_specs(broken)[0]["containers"][0])
        assert any(expected in e for e in errors(broken)), (name, errors(broken))


# ---- the command lines, as the pods would run them ----

def _expand(value, env):
    """Kubernetes' $(VAR) expansion (variables defined earlier in the list)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)),
                  value)


def _envcheck_pods(doc, node_name="gpu-node-7"):
    """(replicated job name or None, the pod's gang size, its env, its argv) of every
    container that runs envcheck, with the downward API's values for a pod of it."""
    out = []
    for rjob, jobset, job in _jobs(doc):
        for c in job["template"]["spec"]["containers"]:
            env = {}
            for e in c.get("env", []):
                ref = (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
                env[e["name"]] = node_name if ref == "spec.nodeName" else jobset \
                    if ref == "metadata.labels['jobset.sigs.k8s.io/jobset-name']" else \
                    _expand(e.get("value", ""), env)
            argv = [_expand(a, env) for a in c.get("command", []) + c.get("args", [])]
            if "envcheck.worker.launched" in argv:
                out.append((rjob, jobset, job, env, argv))
    return out


@pytest.mark.parametrize("name,doc", [(n, d) for n, d in DOCS if _envcheck_pods(d)],
                         ids=[n for n, d in DOCS if _envcheck_pods(d)])
def test_envcheck_pods_run_launcher_mode_over_the_whole_gang(name, doc):
    from torch.distributed import run as torchrun

    (rjob, jobset, job, env, argv), = _envcheck_pods(doc)
    assert argv[0] == "torchrun"
    args = torchrun.parse_args(argv[1:])
    assert args.module and args.training_script == "envcheck.worker.launched"
    options = launched.parse_args(args.training_script_args)
    assert options.out and options.timeout > 0
    # one pod per node, every pod of the gang at once
    assert job["completionMode"] == "Indexed" and job["backoffLimit"] == 0
    assert args.nnodes == str(job["completions"]) == str(job["parallelism"])
    # the rendezvous is pod 0's own DNS name
    host, port = args.rdzv_endpoint.rsplit(":", 1)
    assert args.rdzv_backend == "c10d" and port == "29500"
    if rjob is None:  # an Indexed Job: <job>-<index>.<subdomain>
        subdomain = job["template"]["spec"]["subdomain"]
        assert host == "%s-0.%s" % (doc["metadata"]["name"], subdomain)
    else:  # JobSet: <jobset>-<replicated job>-<job index>-<pod index>.<jobset>
        assert host == "%s-%s-0-0.%s" % (jobset, rjob, jobset)
    assert env["ENVCHECK_HOST"] == "gpu-node-7"  # hosts named as the admin knows them


def test_the_headless_service_selects_the_jobs_pods():
    docs = dict(d for d in DOCS if d[0].startswith("envcheck-indexed-job"))
    service, job = docs["envcheck-indexed-job.yaml#0"], docs["envcheck-indexed-job.yaml#1"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"batch.kubernetes.io/job-name":
                                           job["metadata"]["name"]}
    assert job["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]


@pytest.mark.parametrize("name,doc", [(n, d) for n, d in DOCS
                                      if d["kind"] in ("JobSet", "TrainingRuntime")],
                         ids=[n for n, d in DOCS if d["kind"] in ("JobSet", "TrainingRuntime")])
def test_training_waits_for_envcheck_to_complete(name, doc):
    spec = doc["spec"]["template"]["spec"] if doc["kind"] == "TrainingRuntime" else doc["spec"]
    jobs = {rj["name"]: rj for rj in spec["replicatedJobs"]}
    assert list(jobs)[0] == "envcheck"
    for rj in list(jobs.values())[1:]:
        assert rj["dependsOn"] == [{"name": "envcheck", "status": "Complete"}]


def _set(path, value):
    def change(doc):
        *parents, last = path
        for key in parents:
            doc = doc[key]
        doc[last] = value
    return change


@pytest.mark.parametrize("name,change,expected", [
    ("envcheck-jobset.yaml#0", _set(("spec", "replicatedJobs", 1, "dependsOn", 0, "status"),
                                    "Completed"), "'Completed' is not one of"),
    ("envcheck-jobset.yaml#0", _set(("spec", "network", "enableDNSHostname"), True),
     "'enableDNSHostname' was unexpected"),
    ("envcheck-trainjob.yaml#1", _set(("spec", "trainer", "numNode"), 2),
     "'numNode' was unexpected"),
    ("envcheck-trainjob.yaml#0", _set(("spec", "mlPolicy", "numNodes"), "2"),
     "'2' is not of type 'integer'"),
    ("envcheck-indexed-job.yaml#0", _set(("spec", "clusterIp"), "None"),
     "'clusterIp' was unexpected"),
    ("envcheck-indexed-job.yaml#1", _set(("spec", "completions"), "2"),
     "'2' is not of type 'integer', 'null'"),
])
def test_the_schemas_catch_a_wrong_field_of_each_kind(name, change, expected):
    broken = copy.deepcopy(dict(DOCS)[name])
    change(broken)
    assert any(expected in e for e in errors(broken)), errors(broken)


def _pod_agents(tmp_path, extra_env):
    """The Indexed Job's two pods as two torchrun agents on this machine: their exact
    command line and environment, but loopback for pod 0's DNS name, one rank per pod
    (CPU, gloo) and each pod its own --out (its own /tmp); (returncode, stdout, stderr)."""
    import subprocess
    import sys

    from conftest import launcher_env
    from envcheck.run.supervisor import free_port

    doc = dict(DOCS)["envcheck-indexed-job.yaml#1"]
    tmp_path.mkdir()
    port, agents = free_port(), []
    for pod in (0, 1):
        (_, _, _, env, argv), = _envcheck_pods(doc, node_name="gpu-node-%d" % (pod + 1))
        host = env["MASTER_ADDR"]
        argv = [a.replace("%s:29500" % host, "127.0.0.1:%d" % port)
                .replace("--nproc-per-node=8", "--nproc-per-node=1") for a in argv]
        argv[argv.index("/tmp/envcheck")] = str(tmp_path / ("pod%d" % pod))
        env = dict(launcher_env(), **env, **(extra_env.get(pod) or {}))
        del env["MASTER_ADDR"]  # torchrun sets it for the ranks from the rendezvous
        agents.append(subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", *argv[1:]], env=env,
            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL))
    outs = [a.communicate(timeout=300) for a in agents]
    return [(a.returncode, *out) for a, out in zip(agents, outs)]


@pytest.mark.ranks
def test_the_pods_command_line_runs_and_names_a_bad_node(tmp_path):
    healthy = _pod_agents(tmp_path / "healthy", {})
    assert [code for code, _, _ in healthy] == [0, 0], healthy
    assert "Ready for distributed training: backend gloo, 2 ranks on gpu-node-1, " \
           "gpu-node-2" in healthy[0][1], healthy[0]
    bad = _pod_agents(tmp_path / "bad", {1: {"GLOO_SOCKET_IFNAME": "eth9"}})
    assert bad[0][0] != 0 and bad[1][0] != 0, bad
    assert "setup.socket_interface" in bad[0][1], bad[0]
    assert "GLOO_SOCKET_IFNAME=eth9: gpu-node-2 has no interface eth9" in bad[0][1], bad[0]
