#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check.py MANIFEST DOC - the node agent's manifests, checked for structure.

No cluster runs here, so this is what CI can hold them to: every object
parses; the DaemonSet runs in the node's netns, privileged in no container,
each container dropping ALL capabilities and adding exactly what DOC's
"Privileges" table says; its hostPath volumes, and which containers mount
each, are exactly DOC's "What it changes on a node" table; the kits' secrets
are mounted into latchd alone; the conflist parses and chains latch-cni last.
Each disagreement is one line `k8s-check: ...`; exit 1 if any.
"""
import json
import re
import sys

import yaml


class StrictLoader(yaml.SafeLoader):
    """A key twice in one mapping is refused: PyYAML would keep the last, another parser the first."""


def _no_duplicates(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    for k in keys:
        if keys.count(k) > 1:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {k!r}", node.start_mark)
    return loader.construct_mapping(node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def table(doc, heading):
    """The rows of the first table under HEADING: {first cell without backticks: [other cells]}."""
    rows, inside = {}, False
    for line in doc.splitlines():
        if line.startswith("## "):
            inside = line.strip() == heading
            continue
        m = re.match(r"^\| *`([^`]+)` *\|(.*)\|\s*$", line)
        if inside and m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def words(cell):
    return {w.strip(" `") for w in cell.split(",") if w.strip(" `")}


def main(manifest, docpath):
    bad = []
    with open(manifest) as f:
        try:
            objs = [o for o in yaml.load_all(f, Loader=StrictLoader) if o is not None]
        except yaml.YAMLError as e:
            return [f"{manifest}: {e}".replace("\n", " ")]
    with open(docpath) as f:
        doc = f.read()
    for o in objs:
        if not isinstance(o, dict) or not o.get("apiVersion") or not o.get("kind") or not o.get("metadata", {}).get("name"):
            bad.append(f"an object without apiVersion, kind or metadata.name: {str(o)[:80]}")
    ds = [o for o in objs if o.get("kind") == "DaemonSet"]
    if len(ds) != 1:
        return bad + [f"{len(ds)} DaemonSets; want one"]
    spec = ds[0]["spec"]["template"]["spec"]
    if spec.get("hostNetwork") is not True:
        bad.append("the DaemonSet must run in the node's netns (hostNetwork: true): latchd answers on the pods' gateways")
    caps_doc = {k: words(v[0]) for k, v in table(doc, "## Privileges").items()}
    paths_doc = {k: words(v[0]) for k, v in table(doc, "## What it changes on a node").items()}
    if not caps_doc or not paths_doc:
        bad.append(f"{docpath}: no \"## Privileges\" or \"## What it changes on a node\" table")
    containers = spec.get("initContainers", []) + spec.get("containers", [])
    host_vols = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
    mounted = {}
    for c in containers:
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            bad.append(f"container {c['name']} is privileged; add the capabilities it needs instead")
        capsc = sc.get("capabilities", {})
        if capsc.get("drop") != ["ALL"]:
            bad.append(f"container {c['name']} must drop ALL capabilities")
        have = set(capsc.get("add", []))
        if c["name"] not in caps_doc:
            bad.append(f"container {c['name']} has no row in {docpath}'s Privileges table")
        elif have != caps_doc[c["name"]]:
            bad.append(f"container {c['name']} adds {sorted(have)}; {docpath} says {sorted(caps_doc[c['name']])}")
        for m in c.get("volumeMounts", []):
            if m["name"] in host_vols:
                mounted.setdefault(host_vols[m["name"]], set()).add(c["name"])
            if m["name"] == "kit-secrets" and c["name"] != "latchd":
                bad.append(f"container {c['name']} mounts the kits' secrets; only latchd may")
    for name in set(caps_doc) - {c["name"] for c in containers}:
        bad.append(f"{docpath} names container {name}, which the DaemonSet does not have")
    if mounted != paths_doc:
        bad.append(f"host paths mounted {sorted((k, sorted(v)) for k, v in mounted.items())}; "
                   f"{docpath} says {sorted((k, sorted(v)) for k, v in paths_doc.items())}")
    for o in objs:
        for k, v in (o.get("data") or {}).items():
            if k.endswith(".conflist"):
                try:
                    plugins = json.loads(v)["plugins"]
                    if plugins[-1]["type"] != "latch-cni" or len(plugins) < 2:
                        bad.append(f"{k}: latch-cni must come last, after the cluster's plugin")
                except (ValueError, KeyError, IndexError) as e:
                    bad.append(f"{k}: not a conflist: {e}")
    return bad


if __name__ == "__main__":
    problems = main(sys.argv[1], sys.argv[2])
    for p in problems:
        print(f"k8s-check: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)
