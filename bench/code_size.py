"""Lines per Python module and the longest functions of leakcheck and its
pytest plugin: python bench/code_size.py [--top N] [ROOT]"""

import argparse
import ast
import os


def python_files(root):
    for top in ("leakcheck", os.path.join("pytest_plugin", "pytest_leakcheck")):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def functions(tree, prefix=""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node.end_lineno - node.lineno + 1
            yield from functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", default=".")
    p.add_argument("--top", type=int, default=10)
    a = p.parse_args()
    modules, funcs = [], []
    for path in python_files(a.root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(path, a.root)
        modules.append((text.count("\n"), rel))
        for name, n in functions(ast.parse(text)):
            funcs.append((n, f"{rel}:{name}"))
    modules.sort(reverse=True)
    funcs.sort(reverse=True)
    print(f"{len(modules)} modules, {sum(n for n, _ in modules)} lines")
    print(f"longest {a.top} modules:")
    for n, rel in modules[:a.top]:
        print(f"  {n:5d}  {rel}")
    print(f"longest {a.top} functions:")
    for n, name in funcs[:a.top]:
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
