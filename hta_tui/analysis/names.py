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
    (`keep=0`: `foo<…>`, for the narrowest columns). Only a final `(...)` is a parameter list:
    `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` is not cut to `enumerate`.
    Copies and sets (`Memcpy HtoD (Device -> Pageable)`) and plain names (`aten::linear`)
    stay as they are."""
    if name.startswith(("Memcpy", "Memset", "dma")) or not any(c in name for c in "<("):
        return name
    text = name.replace("(anonymous namespace)::", "").strip()
    if text.endswith(")"):  # a parameter list; `enumerate(DataLoader)#_...__next__` has none
        text = _strip_parameters(text)
    text = _NAMESPACE.sub("", _drop_return_type(text))
    return _SPACES.sub(" ", _fold_templates(text, keep)).strip() or name


def _unfolded(name: str) -> str:
    """The name without return type, namespaces and parameter list, templates kept whole."""
    text = _strip_parameters(name.replace("(anonymous namespace)::", "").strip())
    return _SPACES.sub(" ", _NAMESPACE.sub("", _drop_return_type(text))).strip() or name


def _fold_level(name: str, level: int) -> str:
    """Ever longer forms of a name: folded at depth 0, at depth 1, templates whole, as written."""
    if level <= 1:
        return fold_name(name, level)
    return _unfolded(name) if level == 2 else name


def distinct_folds(names: list[str], keep: int = 1) -> list[str]:
    """`fold_name(n, keep)` of each distinct name, except that names which would fold to one
    text are folded less (depth 1, templates whole, as written) until they differ: four
    `vectorized_elementwise_kernel<…>` rows must not look the same."""
    levels = dict.fromkeys(names, keep)
    for _ in range(4):
        texts = {n: _fold_level(n, lv) for n, lv in levels.items()}
        seen: dict[str, list[str]] = {}
        for n, t in texts.items():
            seen.setdefault(t, []).append(n)
        clashes = [ns for ns in seen.values() if len(ns) > 1]
        if not clashes:
            break
        for ns in clashes:
            for n in ns:
                levels[n] = min(levels[n] + 1, 3)
    return [_fold_level(n, levels[n]) for n in names]


def fold_names(names: pl.Series, keep: int = 1) -> pl.Series:
    """`distinct_folds` of every value, computed once per distinct name."""
    uniq = names.drop_nulls().unique()
    folded = distinct_folds(uniq.to_list(), keep)
    return names.replace_strict(uniq, folded, default=names, return_dtype=pl.String)


#: Characters after which a kept middle part starts, so it starts on a word (`_MT256x…`):
#: a path or a stack frame (`modeling_bert.py(364)`) is looked for further back.
_WORD_BREAKS = (("/ ", 24), ("_<>,:(.", 10))


def elide_middle(text: str, width: int) -> str:
    """`text` in `width` characters: its head and tail around one `…`."""
    if len(text) <= width:
        return text
    keep = max(width - 1, 0)
    head = keep // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


#: Below this width a cut keeps the head and the differing part, no tail.
NARROW = 24


def _cut_around(text: str, at: int, width: int) -> str:
    """`text` in `width` characters, keeping its head, its tail and the part from `at` (the
    first character that tells it from a neighbour; moved back to the start of its word)."""
    n = len(text)
    start = at
    for breaks, back in _WORD_BREAKS:
        found = next((k for k in range(at, max(at - back, 0), -1) if text[k - 1] in breaks), None)
        if found is not None:
            start = found
            break
    tail = max(2, width // 6) if width >= NARROW else 0  # a narrow cut keeps no tail
    if at + min(12, width // 4) < width - 1 - tail:  # the difference and what follows it fit
        return text[: width - 1 - tail] + "…" + text[n - tail :]
    head = max(2, width // 4 if width >= NARROW else width // 3)
    if n - start <= width - 1 - head:  # the kept part runs to the end
        return text[: width - 1 - (n - start)] + "…" + text[start:]
    middle = max(width - head - tail - 2, 1)
    return text[:head] + "…" + text[start : start + middle] + "…" + text[n - tail :][:tail]


def distinct_cuts(texts: list[str], width: int) -> list[str]:
    """Each text cut to `width` (head … tail), except that texts which would look the same
    keep what tells them apart: the part where each first differs from its nearest one.
    Two Tensile GEMMs that differ only in `MT256x128x64` / `MT128x224x64`, or two call stacks
    that differ only in one middle frame, stay two different-looking rows."""
    cuts = [elide_middle(t, width) for t in texts]
    groups: dict[str, set[str]] = {}
    for text, cut in zip(texts, cuts, strict=True):
        if cut != text:
            groups.setdefault(cut, set()).add(text)
    redo: dict[str, str] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        ordered = sorted(members)  # a text's nearest neighbours in order share most prefix
        for i, text in enumerate(ordered):
            near = [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]
            at = max(_common_prefix(text, other) for other in near)
            redo[text] = _cut_around(text, at, width)
    return [redo.get(t, c) for t, c in zip(texts, cuts, strict=True)]
