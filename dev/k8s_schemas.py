"""Build tests/data/k8s/: the published schemas the Kubernetes manifests in docs/k8s/ are
validated against offline (tests/test_k8s_manifests.py), one file per kind.

    python dev/k8s_schemas.py KUBERNETES_VALIDATE_WHEEL JOBSET_CRD TRAINJOB_CRD RUNTIME_CRD

- Job (batch/v1) and Service (v1) of Kubernetes v1.33.0: the ``v1.33.0-local-strict``
  schemas that kubernetes-validate 1.37.0 ships (its fork of yannh/instrumenta's
  kubernetes-json-schema, generated from Kubernetes' OpenAPI), with their
  ``_definitions.json`` references inlined (as the project's ``-standalone-strict``
  variants are);
- JobSet (jobset.x-k8s.io/v1alpha2): the ``openAPIV3Schema`` of kubernetes-sigs/jobset
  v0.12.0's CRD, config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml;
- TrainJob and TrainingRuntime (trainer.kubeflow.org/v1alpha1): the ``openAPIV3Schema``
  of kubeflow/trainer v2.3.0's CRDs, manifests/base/crds/.

The CRD schemas are made strict as kubeconform's openapi2jsonschema makes them (an object
with properties and no ``x-kubernetes-preserve-unknown-fields`` takes no other field:
kubectl's strict field validation rejects one, where the API server would drop it), and
``apiVersion``/``kind`` are pinned. Descriptions are left out (they are most of the
bytes, and no validation reads them); nothing else is changed. Each file is compact JSON,
gzipped; SOURCES.md says where each came from.
"""

import gzip
import json
import os
import sys
import zipfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "k8s")
K8S = "kubernetes_validate/kubernetes-json-schema/v1.33.0-local-strict/"


def _strip(schema):
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


def _inline(schema, definitions, seen=()):
    """Every ``_definitions.json#/$defs/NAME`` reference replaced by its schema."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if ref:
            name = ref.split("#/$defs/", 1)[1]
            if name in seen:  # no Job or Service definition refers to itself
                raise ValueError("recursive definition %s" % name)
            return _inline(definitions[name], definitions, seen + (name,))
        return {k: _inline(v, definitions, seen) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inline(v, definitions, seen) for v in schema]
    return schema


def _strict(schema):
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and \
                not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _crd(path):
    with open(path, encoding="utf-8") as f:
        crd = yaml.safe_load(f)
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"type": "string",
                                          "enum": ["%s/%s" % (group, version["name"])]}
    schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind"})
    return "%s-%s-%s" % (kind.lower(), group.split(".")[0], version["name"]), schema


def _write(name, schema):
    data = json.dumps(_strip(schema), sort_keys=True, separators=(",", ":")).encode()
    with gzip.GzipFile(os.path.join(OUT, name + ".json.gz"), "wb", mtime=0) as f:
        f.write(data)
    print("%s.json.gz: %d bytes of JSON" % (name, len(data)))


def main(wheel, *crds):
    os.makedirs(OUT, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        definitions = json.loads(z.read(K8S + "_definitions.json"))["$defs"]
        for name in ("job-batch-v1", "service-v1"):
            _write(name, _inline(json.loads(z.read(K8S + name + ".json")), definitions))
    for path in crds:
        _write(*_crd(path))


if __name__ == "__main__":
    main(*sys.argv[1:])
