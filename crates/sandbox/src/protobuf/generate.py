#!/usr/bin/env python3
"""Regenerates messages.json, the sandbox's protobuf schema table.

The table is read from the prost messages the `k8s-pb` crate generates (field numbers,
wire types, message references) and named with the JSON names of the OpenAPI documents
the sandbox serves, so the codec needs no descriptor at run time. The unit tests check
every entry against `k8s-pb`'s own `prost::Message` implementations.

    python3 crates/sandbox/src/protobuf/generate.py ~/.cargo/registry/src/*/k8s-pb-0.9.0/src
"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SRC = sys.argv[1]

WRAPPERS = [
    "::core::option::Option", "::prost::alloc::vec::Vec", "::prost::alloc::boxed::Box",
    "::prost::alloc::collections::BTreeMap", "::prost::alloc::string::String",
]
SCALARS = {"string", "int32", "int64", "bool", "double"}


def openapi_package(module):
    if module[0] == "api":
        return "io.k8s.api." + ".".join(module[1:])
    if module[0] == "apimachinery":
        return "io.k8s.apimachinery." + ".".join(module[1:])
    if module[0] == "apiextensions_apiserver":
        return "io.k8s.apiextensions-apiserver." + ".".join(module[1:])
    if module[0] == "kube_aggregator":
        return "io.k8s.kube-aggregator." + ".".join(module[1:])
    return "io.k8s.metrics." + ".".join(module[1:])


def norm(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


schemas = {}
for path in sorted(glob.glob(os.path.join(ROOT, "assets", "openapi-v3", "*.json"))):
    if path.endswith("index.json"):
        continue
    with open(path) as f:
        for name, schema in json.load(f)["components"]["schemas"].items():
            # Meta kinds (DeleteOptions, WatchEvent) list other group versions per document.
            gvks = schemas.get(name, {}).get("x-kubernetes-group-version-kind", [])
            schemas[name] = schema
            for gvk in gvks:
                if gvk not in schema.setdefault("x-kubernetes-group-version-kind", []):
                    schema["x-kubernetes-group-version-kind"].append(gvk)
by_norm = {norm(name): name for name in schemas}

FIELD = re.compile(
    r"#\[prost\(([^\]]*)\)\]\s*pub (?:r#)?(\w+):\s*(.*?),\s*(?=///|#\[|\}|$)", re.S)
STRUCT = re.compile(r"pub struct (\w+) \{(\}|.*?\n\})", re.S)

messages = {}
for path in sorted(glob.glob(os.path.join(SRC, "**", "mod.rs"), recursive=True)):
    module = os.path.relpath(os.path.dirname(path), SRC).split(os.sep)
    with open(path) as f:
        text = f.read()
    for struct in STRUCT.finditer(text):
        name, body = struct.group(1), struct.group(2)
        key = ".".join(module + [name])
        openapi = by_norm.get(norm(openapi_package(module) + "." + name))
        props = schemas.get(openapi, {}).get("properties", {}) if openapi else {}
        prop_names = {norm(p): p for p in props}
        required = set(schemas.get(openapi, {}).get("required", [])) if openapi else set()
        fields = []
        for m in FIELD.finditer(body):
            attr, rust, ty = m.group(1), m.group(2), m.group(3)
            tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
            first = attr.split(",")[0].strip()
            label = "rep" if "repeated" in attr else "opt"
            if first.startswith("btree_map"):
                label = "map"
                first = re.search(r'"string, (\w+)"', attr).group(1)
            if first.startswith("bytes"):
                first = "bytes"
            if first == "message":
                t = ty
                for w in WRAPPERS:
                    t = t.replace(w, "")
                paths = re.findall(r"((?:super::)*(?:\w+::)*[A-Z]\w*)", t)
                parts = paths[-1].split("::")
                base = list(module)
                while parts and parts[0] == "super":
                    base.pop()
                    parts.pop(0)
                first = "message:" + ".".join(base + parts)
            elif first not in SCALARS | {"bytes"}:
                raise SystemExit(f"{key}.{rust}: unknown field type {first}")
            camel = re.sub(r"_(\w)", lambda c: c.group(1).upper(), rust)
            json_name = prop_names.get(norm(rust), camel)
            fields.append([tag, json_name, first, label, json_name in required])
        fields.sort()
        messages[key] = {"openapi": openapi, "fields": fields}
        if openapi is None and name in ("Time", "MicroTime", "Quantity", "IntOrString"):
            raise SystemExit(f"{key}: no OpenAPI definition")

# Go's embedded structs (`json:",inline"`) are a field of their own in protobuf and
# spread into the parent's keys in JSON: VolumeSource in Volume, ProbeHandler in Probe.
for key, message in messages.items():
    props = schemas.get(message["openapi"], {}).get("properties", {}) if message["openapi"] else {}
    if not props:
        continue
    for field in message["fields"]:
        if field[1] in props or not field[2].startswith("message:") or field[3] != "opt":
            continue
        inner = messages[field[2][len("message:"):]]["fields"]
        by_norm_prop = {norm(p): p for p in props}
        if inner and all(norm(f[1]) in by_norm_prop for f in inner):
            field[3] = "inline"
            for f in inner:
                f[1] = by_norm_prop[norm(f[1])]

# Kinds kubectl sends in protobuf from groups whose OpenAPI documents the sandbox does
# not serve (yet): their JSON names are the proto names, lowerCamel (checked by hand).
EXTRA_KINDS = {
    "scheduling.k8s.io/v1/PriorityClass": "api.scheduling.v1.PriorityClass",
    "scheduling.k8s.io/v1/PriorityClassList": "api.scheduling.v1.PriorityClassList",
    "authorization.k8s.io/v1/SelfSubjectAccessReview": "api.authorization.v1.SelfSubjectAccessReview",
    "authorization.k8s.io/v1/SelfSubjectRulesReview": "api.authorization.v1.SelfSubjectRulesReview",
    "authentication.k8s.io/v1/SelfSubjectReview": "api.authentication.v1.SelfSubjectReview",
}

# Keep what the served kinds reach, and the envelope and meta types.
roots = [k for k, m in messages.items() if m["openapi"] in schemas]
roots += ["apimachinery.pkg.runtime.Unknown", "apimachinery.pkg.runtime.RawExtension",
          "apimachinery.pkg.apis.meta.v1.Duration"] + list(EXTRA_KINDS.values())
keep, todo = set(), list(roots)
while todo:
    key = todo.pop()
    if key in keep:
        continue
    keep.add(key)
    for field in messages[key]["fields"]:
        if field[2].startswith("message:"):
            todo.append(field[2][len("message:"):])

kinds = {}
for key in sorted(keep):
    openapi = messages[key]["openapi"]
    for gvk in (schemas.get(openapi, {}) or {}).get("x-kubernetes-group-version-kind", []) if openapi else []:
        api_version = gvk["version"] if not gvk["group"] else gvk["group"] + "/" + gvk["version"]
        kinds[api_version + "/" + gvk["kind"]] = key

kinds.update(EXTRA_KINDS)
# lowerCamel of prost's snake_case loses acronyms; the few in EXTRA_KINDS' messages:
for field in messages["api.authorization.v1.NonResourceRule"]["fields"]:
    if field[1] == "nonResourceUrLs":
        field[1] = "nonResourceURLs"
out = {
    "source": "k8s-pb 0.9.0",
    "kinds": kinds,
    "messages": {k: messages[k] for k in sorted(keep)},
}
with open(os.path.join(HERE, "messages.json"), "w") as f:
    json.dump(out, f, indent=0, sort_keys=True)
    f.write("\n")
# The tests decode the codec's bytes with k8s-pb's own messages, kind by kind.
with open(os.path.join(HERE, "k8s_pb_kinds.rs"), "w") as f:
    f.write("// Generated by generate.py: every kind's k8s-pb message, for the codec's tests.\n")
    f.write("k8s_pb_kinds! {\n")
    for key in sorted(set(kinds.values())):
        f.write(f'    "{key}" => k8s_pb::{key.replace(".", "::")},\n')
    f.write("}\n")
print(len(keep), "messages,", len(kinds), "kinds")
