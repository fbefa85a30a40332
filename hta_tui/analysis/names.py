"""Kernel names short enough to tell apart in a narrow column.

A CUDA kernel's name is mostly its return type, namespaces, nested template arguments and
parameter list; the part that tells two kernels apart is the function and its first level of
template arguments. `fold_name` keeps those, folds deeper template arguments to `…`, and drops
the return type, the namespaces and the parameters. Full names stay in detail views, JSON and
CSV exports.
"""

from __future__ import annotations

import re

import polars as pl

_NAMESPACE = re.compile(r"\b(?:[A-Za-z_]\w*|\(anonymous namespace\))::")
_SPACES = re.compile(r"\s+")
#: With every template argument folded, a function name shorter than this (`Kernel`) keeps
#: its first-level arguments: they are what names the kernel.
GENERIC_NAME = 12


def _strip_parameters(name: str) -> str:
    """The name without its trailing parameter list `(...)` at template depth 0."""
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif c == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def _fold_templates(name: str, keep: int = 1) -> str:
    """Template arguments below level `keep` become `…` (keep=0: `foo<…>`); a first-level
    argument that is a function or lambda type (`Impl(Iter&, Type)::{lambda()#2}`) becomes
    `Impl(…)`."""
    if keep == 0 and "<" in name:
        base = name.split("<", 1)[0]
        if len(base) >= GENERIC_NAME:  # `cutlass::Kernel<Gemm...>`: the argument is the name
            return base + "<…>"
        keep = 1
    out: list[str] = []
    depth = 0
    skipping: int | None = None  # brackets open inside a skipped argument
    for c in name:
        if skipping is not None:
            if c in "(<{[":
                skipping += 1
            elif c in ")}]" or (c == ">" and skipping > 0):
                skipping -= 1
            elif c == ">" or (c == "," and skipping == 0):
                skipping = None
                depth -= c == ">"
                out.append(c)
            continue
        if c == "<":
            depth += 1
            if depth == 2:
                out.append("<…")
                continue
        elif c == ">":
            depth -= 1
            if depth == 1:
                out.append(">")
                continue
        elif c == "(" and depth == 1:
            out.append("(…)")
            skipping = 1
            continue
        if depth < 2:
            out.append(c)
    return "".join(out)


def _drop_return_type(name: str) -> str:
    """`void foo<int>` -> `foo<int>`: the text after the last space outside template brackets."""
    depth, cut = 0, 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif c == " " and depth == 0:
            cut = i + 1
    return name[cut:]


def fold_name(name: str, keep: int = 1) -> str:
    """`void at::native::foo<4, at::native::Bar<float>>(int, ...)` -> `foo<4, Bar<…>>`
    (`keep=0`: `foo<…>`, for the narrowest columns).
    Copies and sets (`Memcpy HtoD (Device -> Pageable)`) and plain names (`aten::linear`)
    stay as they are."""
    if name.startswith(("Memcpy", "Memset", "dma")) or not any(c in name for c in "<("):
        return name
    text = _strip_parameters(name.replace("(anonymous namespace)::", "").strip())
    text = _NAMESPACE.sub("", _drop_return_type(text))
    return _SPACES.sub(" ", _fold_templates(text, keep)).strip() or name


def fold_names(names: pl.Series, keep: int = 1) -> pl.Series:
    """`fold_name` of every value, computed once per distinct name."""
    uniq = names.drop_nulls().unique()
    folded = [fold_name(n, keep) for n in uniq.to_list()]
    return names.replace_strict(uniq, folded, default=names, return_dtype=pl.String)
