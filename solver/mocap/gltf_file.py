"""glTF/GLB documents: read the JSON and check the structure Blender's importer trusts
(no bpy). Specification: the Khronos glTF 2.0 specification, sections "Nodes and
Hierarchy" (the node hierarchy must be a set of disjoint trees) and "GLB File Format".
"""
import json
import math
import os
import struct


class GltfError(ValueError):
    """A glTF/GLB file that cannot be imported: the message is one line naming the file."""


def read_document(path):
    """The glTF JSON document (a dict) of a .gltf or .glb file; GltfError when the file is
    not one, its JSON is broken or not an object, or its hierarchy is invalid (check)."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as ex:
        raise GltfError(f"{name}: cannot read the file ({ex.strerror or ex})") from None
    try:
        if raw[:4] == b"glTF":
            (length, kind) = struct.unpack_from("<I4s", raw, 12)
            if kind != b"JSON":
                raise GltfError(f"{name}: the GLB file's first chunk is not JSON")
            text = raw[20:20 + length]
        else:
            text = raw
        doc = json.loads(text.decode("utf-8"))
    except (struct.error, UnicodeDecodeError, ValueError) as ex:
        if isinstance(ex, GltfError):
            raise
        raise GltfError(f"{name}: not a readable glTF file ({type(ex).__name__}: "
                        f"{str(ex).splitlines()[0][:80]})") from None
    check(doc, name)
    return doc


def check(doc, name):
    """GltfError unless `doc` is an object whose nodes form disjoint trees with valid
    child indices, and whose animation samplers name existing accessors."""
    if not isinstance(doc, dict):
        raise GltfError(f"{name}: the glTF JSON is a {type(doc).__name__}, not an object")
    nodes = doc.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise GltfError(f"{name}: 'nodes' is not a list of objects")
    parent = {}
    for i, node in enumerate(nodes):
        kids = node.get("children", [])
        if not isinstance(kids, list):
            raise GltfError(f"{name}: the children of node {i} are not a list")
        for c in kids:
            if not isinstance(c, int) or isinstance(c, bool) or not 0 <= c < len(nodes):
                raise GltfError(f"{name}: node {i} has a child {c!r} that is no node")
            if c == i or c in parent:
                raise GltfError(f"{name}: node {c} has two parents or is its own child "
                                "(the node hierarchy must be trees)")
            parent[c] = i
    for i in range(len(nodes)):  # a cycle: walking up from a node comes back to it
        seen, k = {i}, i
        while k in parent:
            k = parent[k]
            if k in seen:
                raise GltfError(f"{name}: the node hierarchy has a cycle through node {k}")
            seen.add(k)
    accessors = doc.get("accessors", [])
    if not isinstance(accessors, list):
        raise GltfError(f"{name}: 'accessors' is not a list")
    for a, anim in enumerate(doc.get("animations", []) or []):
        samplers = anim.get("samplers", []) if isinstance(anim, dict) else None
        if not isinstance(samplers, list):
            raise GltfError(f"{name}: animation {a} has no list of samplers")
        for s in samplers:
            for key in ("input", "output"):
                idx = s.get(key) if isinstance(s, dict) else None
                if not isinstance(idx, int) or not 0 <= idx < len(accessors):
                    raise GltfError(f"{name}: a sampler of animation {a} names no accessor "
                                    f"as its {key}")


def sample_rate(doc):
    """Keys per second of a checked document's animations (median over their samplers,
    from the input accessors' count/min/max), rounded when within 0.5 % of a whole
    number; None when no sampler has more than two keys over a finite positive span."""
    accessors = doc.get("accessors", [])
    rates = []
    for anim in doc.get("animations", []) or []:
        for sampler in anim.get("samplers", []):
            acc = accessors[sampler["input"]]
            if not isinstance(acc, dict):
                continue
            try:
                count = int(acc.get("count", 0))
                lo, hi = float(acc.get("min", [0])[0]), float(acc.get("max", [0])[0])
            except (TypeError, ValueError, IndexError, KeyError, OverflowError):
                continue
            if count > 2 and math.isfinite(lo) and math.isfinite(hi) and hi > lo \
                    and math.isfinite((count - 1) / (hi - lo)):
                rates.append((count - 1) / (hi - lo))
    if not rates:
        return None
    rates.sort()
    n = len(rates)
    rate = rates[n // 2] if n % 2 else 0.5 * (rates[n // 2 - 1] + rates[n // 2])
    return float(round(rate)) if abs(rate - round(rate)) < 0.005 * rate else rate
