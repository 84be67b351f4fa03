"""MMP's module layout: the experiments are a folder of products, the CLI and rules still name every
experiment, and no two modules import each other (at module level or inside a function)."""
import ast
import re

from conftest import REPO

PKG = REPO / "papers" / "mmp"


def module_name(path):
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path):
    """The modules of papers.mmp that `path` imports anywhere in its body (function-level included)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    known = {module_name(p) for p in PKG.rglob("*.py")}
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:   # `from . import factorial` imports a module, not the package
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m in known and m != me}


def relative_imports(path):
    """The modules that `path`'s relative imports name (function-level included)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            yield f"{anchor}.{node.module}" if node.module else anchor


def test_no_two_modules_import_each_other():
    graph = {module_name(p): imports(p) for p in PKG.rglob("*.py")}

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, (*seen, n))) for n in graph.get(start, ()))

    unknown = {m for p in PKG.rglob("*.py") for m in relative_imports(p) if m not in graph}
    assert not unknown, f"relative imports of modules that do not exist: {unknown}"
    cycles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a)})
    assert not cycles, f"modules that import each other (directly or through others): {cycles}"


def test_experiments_are_a_folder_of_products_and_every_rule_experiment_runs():
    from papers.mmp.experiments import EXPERIMENTS

    assert not (PKG / "experiments.py").exists() and (PKG / "experiments" / "__init__.py").is_file()
    assert (PKG / "experiments" / "cindex_table.py").is_file() and (PKG / "experiments" / "cost_shapes.py").is_file()
    rules = (PKG / "rules.smk").read_text()
    arms = re.search(r"^MMP_ARMS = \[(.*?)\]", rules, re.M | re.S).group(1)
    named = [f"cindex_{a}" for a in re.findall(r'"(\w+)"', arms)]
    named += re.findall(r'"(\w+)"', re.search(r'MMP_EXPERIMENTS = .*?\+ \[(.*?)\]', rules).group(1))
    assert set(named) <= set(EXPERIMENTS), set(named) - set(EXPERIMENTS)
