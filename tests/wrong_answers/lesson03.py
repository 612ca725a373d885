"""Plausible wrong answers to lesson 03's exercises."""


# 03-1 relative -> absolute
def rel_ignores_is_package(importer, is_package, level, module):
    parts = importer.split(".")[:-1]
    if level <= 0:
        return module or None
    if level - 1 >= len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def rel_off_by_one(importer, is_package, level, module):
    parts = importer.split(".")
    package = parts if is_package else parts[:-1]
    if level <= 0:
        return module or None
    if level > len(package):
        return None
    base = package[: len(package) - level]
    return ".".join(base + ([module] if module else [])) or None


def rel_no_none_when_too_high(importer, is_package, level, module):
    parts = importer.split(".")
    package = parts if is_package else parts[:-1]
    if level <= 0:
        return module or None
    base = package[: max(0, len(package) - (level - 1))]
    return ".".join(base + ([module] if module else []))


def rel_trailing_dot(importer, is_package, level, module):
    parts = importer.split(".")
    package = parts if is_package else parts[:-1]
    if level <= 0:
        return module or None
    if level - 1 >= len(package):
        return None
    return ".".join(package[: len(package) - (level - 1)]) + "." + module


# 03-2 DeepSeek smallest in-degree
def deepseek_keeps_self_loops(G):
    remaining, order = set(G.nodes), []
    while remaining:
        indeg = {n: sum(1 for p in G.predecessors(n) if p in remaining) for n in remaining}
        pick = min(remaining, key=lambda n: (indeg[n], n))
        order.append(pick)
        remaining.remove(pick)
    return order


def deepseek_static_in_degree(G):
    return sorted(G.nodes, key=lambda n: (sum(1 for p in G.predecessors(n) if p != n), n))


def deepseek_ties_by_insertion(G):
    remaining, order = list(G.nodes), []
    while remaining:
        indeg = {n: sum(1 for p in G.predecessors(n) if p in remaining and p != n) for n in remaining}
        pick = min(remaining, key=lambda n: indeg[n])
        order.append(pick)
        remaining.remove(pick)
    return order


def deepseek_out_degree(G):
    remaining, order = set(G.nodes), []
    while remaining:
        deg = {n: sum(1 for s in G.successors(n) if s in remaining and s != n) for n in remaining}
        pick = min(remaining, key=lambda n: (deg[n], n))
        order.append(pick)
        remaining.remove(pick)
    return order


WRONG_ANSWERS = {
    "03-1": [rel_ignores_is_package, rel_off_by_one, rel_no_none_when_too_high, rel_trailing_dot],
    "03-2": [deepseek_keeps_self_loops, deepseek_static_in_degree, deepseek_ties_by_insertion,
             deepseek_out_degree],
}
