"""The package ships type stubs (PEP 561: a .pyi beside each module it covers, and py.typed) that say what the
modules define: every public class, function and method, with the same parameters; every public name has a
docstring, so that help(asgd.MatrixFactorization) is useful; mypy (when installed) reads the stubs."""

import ast
import importlib
import inspect
import os
import pydoc
import subprocess
import sys
import textwrap

import pytest

import asgd

PACKAGE = os.path.dirname(asgd.__file__)
STUBS = sorted(name for name in os.listdir(PACKAGE) if name.endswith(".pyi"))
# Special methods a stub declares as the module does (the others are Python's own).
SPECIAL = {"__init__", "__len__", "__contains__", "__getitem__", "__call__", "__getattr__"}


def public(name):
    return not name.startswith("_") or name in SPECIAL


def stub_tree(stub):
    with open(os.path.join(PACKAGE, stub)) as f:
        return ast.parse(f.read(), stub)


def stub_parameters(node):
    """(name, has a default) of a stub function's parameters, self and cls left out."""
    a = node.args
    positional = a.posonlyargs + a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    out = [(p.arg, d) for p, d in zip(positional, defaults)]
    out += [(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.vararg:
        out.append(("*" + a.vararg.arg, False))
    if a.kwarg:
        out.append(("**" + a.kwarg.arg, False))
    return [p for p in out if p[0] not in ("self", "cls")]


def runtime_parameters(function):
    out = []
    for p in inspect.signature(function).parameters.values():
        name = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        out.append((name, p.default is not p.empty))
    return [p for p in out if p[0] not in ("self", "cls")]


def stub_members(classes, name):
    """The methods and properties a stub class declares, with those of its bases in the same stub."""
    node = classes[name]
    members = {}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            members.update(stub_members(classes, base.id))
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            members[item.name] = item  # the last of overloads: they share the parameter names here
    return members


def runtime_members(cls):
    """The public methods and properties the package's classes in cls's MRO define."""
    members = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("asgd."):
            continue
        for name, value in vars(klass).items():
            if public(name) and (isinstance(value, (property, classmethod, staticmethod)) or inspect.isfunction(value)):
                members[name] = getattr(cls, name)
    return members


@pytest.mark.parametrize("stub", STUBS)
def test_the_stubs_declare_what_the_module_defines(stub):
    module = importlib.import_module("asgd." + stub[:-4])
    tree = stub_tree(stub)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    defined = {name for name, value in vars(module).items()
               if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ == module.__name__}
    assert {n for n in defined if public(n)} == {n for n in {*functions, *classes} if public(n)}
    for name, node in functions.items():
        assert stub_parameters(node) == runtime_parameters(getattr(module, name)), name
    for name in classes:
        if not public(name):
            continue
        declared, real = stub_members(classes, name), runtime_members(getattr(module, name))
        assert set(declared) == set(real), name
        for member, node in declared.items():
            value = inspect.getattr_static(getattr(module, name), member)
            if isinstance(value, property):
                continue
            assert stub_parameters(node) == runtime_parameters(real[member]), f"{name}.{member}"


def test_every_public_name_and_member_has_a_docstring():
    missing = []
    for name in asgd.__all__:
        value = getattr(asgd, name)
        if not (value.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(value):
            for member, attribute in runtime_members(value).items():
                if member != "__init__" and not (inspect.getdoc(attribute) or "").strip():
                    missing.append(f"{name}.{member}")
    assert missing == []
    assert (asgd.__doc__ or "").strip()


def test_help_tells_the_parameters_and_the_calls():
    text = pydoc.render_doc(asgd.MatrixFactorization, renderer=pydoc.plaintext)
    for words in ("factors: factors per user and item", "verbose:", "report_", "fit(self, X, validation=None",
                  "recommend(self, userid", "Ctrl-C stops the run", "KeyboardInterrupt", "user_factors"):
        assert words in text, words


def test_the_package_is_marked_typed():
    assert os.path.exists(os.path.join(PACKAGE, "py.typed"))


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="no mypy (Debian's python3-mypy)")
def test_mypy_checks_a_program_against_the_stubs(tmp_path):
    program = tmp_path / "use.py"
    program.write_text(textwrap.dedent("""
        import numpy as np
        import asgd
        m = asgd.MatrixFactorization(factors=8, verbose=True)
        m.fit((np.array([0, 1]), np.array([1, 0]), np.array([4.0, 3.0])))
        ids, scores = m.recommend(0, N=3)
        assert m.report_ is not None
        h: np.ndarray = m.report_.staleness
        w = asgd.Word2Vec([["a", "b"]], min_count=1)
        assert w.wv is not None
        print(w.wv.most_similar("a", topn=1)[0][0].upper())
        wrong: int = asgd.rmse(m, (np.array([0]), np.array([1]), np.array([4.0])))
        m.recommend(0, M=3)
    """))
    env = dict(os.environ, MYPYPATH=os.path.dirname(PACKAGE))
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                           "--ignore-missing-imports", str(program)], capture_output=True, text=True, env=env,
                          timeout=300)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # The two mistakes, and nothing else: rmse is a float, recommend has no M.
    assert len(errors) == 2, done.stdout
    assert 'expression has type "float", variable has type "int"' in errors[0]
    assert 'Unexpected keyword argument "M"' in errors[1]
