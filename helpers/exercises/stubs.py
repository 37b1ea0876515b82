"""Is the learner's function an untouched stub (only ``pass``, ``return None``, ``...`` or
``raise NotImplementedError``: "not attempted yet"), or code that forgot its ``return``?"""

import ast
import contextlib
import inspect
import textwrap
from typing import Callable


def _is_placeholder(node: ast.AST) -> bool:
    """``None``, ``...`` or a tuple of them: what a stub returns."""
    if isinstance(node, ast.Tuple):
        return all(map(_is_placeholder, node.elts))
    return node is None or (isinstance(node, ast.Constant) and node.value in (None, Ellipsis))


def _is_stub_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr):  # a docstring, a bare string or ...
        value = node.value.value if isinstance(node.value, ast.Constant) else None
        return isinstance(value, str) or value is Ellipsis
    if isinstance(node, ast.Return):
        return _is_placeholder(node.value)
    if isinstance(node, ast.Raise):
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def is_stub_body(body: list) -> bool:
    """Is this parsed function body only stub statements? Also used by the notebooks'
    write-first test (a stub of an exercise may come before its reference, a real body not)."""
    return all(map(_is_stub_statement, body))


def _definition(fn: Callable) -> ast.AST | None:
    """The parsed ``def`` or ``lambda`` of ``fn`` from its source, or None without one."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    source = textwrap.dedent("".join(lines))
    if getattr(fn, "__name__", "") != "<lambda>":
        with contextlib.suppress(SyntaxError):
            return next((node for node in ast.walk(ast.parse(source))
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        return None
    line = fn.__code__.co_firstlineno - first  # the lambda's line within ``source``
    text = "\n".join(source.splitlines()[line:])
    text = text[text.find("lambda"):][:500]  # from the lambda on: maybe part of a statement
    for end in range(len(text), 0, -1):
        with contextlib.suppress(SyntaxError):
            return next(node for node in ast.walk(ast.parse(text[:end], mode="eval"))
                        if isinstance(node, ast.Lambda))
    return None


def is_stub(fn: Callable) -> bool:
    """Is ``fn`` an untouched stub? Real code that returns None forgot its ``return``; without
    its source (a built-in, a partial), a function counts as written. For a class: are all the
    methods the learner writes (all but ``__init__``) stubs?"""
    if isinstance(fn, type):
        written = [f for name, f in vars(fn).items()
                   if inspect.isfunction(f) and name != "__init__"]
        return bool(written) and all(map(is_stub, written))
    node = _definition(fn)
    if isinstance(node, ast.Lambda):
        return _is_placeholder(node.body)
    return node is not None and is_stub_body(node.body)
