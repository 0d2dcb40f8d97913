"""Griffe extension for the API reference: the docstrings' reStructuredText roles as Markdown.

The package's docstrings name objects the Sphinx way (:class:`TheseusBlock`, :func:`~pkg.mod.function`).
Markdown has no roles, so each becomes a code span, and a link where it names an object the reference shows (public,
documented, inside the documented floors). Nothing in ``src/`` changes; a name the reference does not show stays
plain code, so an unresolved link can never fail ``mkdocs build --strict``.
"""

from __future__ import annotations

import re

import griffe

KINDS = "class|func|meth|attr|data|mod|obj|exc|const"
ROLE = re.compile(rf":(?:py:)?(?:{KINDS}):`(?P<bang>!?)(?P<tilde>~?)(?P<target>[^`]+)`")
DOCUMENTED = ("theseus_pl.core", "theseus_pl.data", "theseus_pl.lightning", "theseus_pl.deployment", "theseus_pl.app")


def _documented(obj: griffe.Object | griffe.Alias) -> griffe.Object | None:
    """The object the reference renders for ``obj``, or None where it renders none."""
    try:
        target = obj.final_target if obj.is_alias else obj
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    path = target.path
    if not path.startswith(DOCUMENTED) or any(part.startswith("_") for part in path.split(".")):
        return None
    if target.is_module:
        return target
    return target if target.docstring else None


def _resolve(name: str, scope: griffe.Object, package: griffe.Module) -> griffe.Object | None:
    """``name`` as Sphinx would read it in ``scope``: absolute, or relative to the scope and its parents."""
    if name.startswith(package.name + "."):
        try:
            return _documented(package[name[len(package.name) + 1 :]])
        except (KeyError, ValueError):
            return None
    current: griffe.Object | None = scope
    while current is not None:
        try:
            return _documented(current[name])
        except (KeyError, ValueError, AttributeError):
            current = current.parent
    return None


class RstRoles(griffe.Extension):
    """Rewrites roles in every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: object) -> None:
        self._rewrite(pkg, pkg, seen=set())

    def _rewrite(self, obj: griffe.Object, package: griffe.Module, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.is_module and obj.docstring and obj.docstring.value.strip() == obj.name:
            obj.docstring = None  # a package docstring that only repeats its name ("core") says nothing
        if obj.docstring:
            scope = obj if obj.is_module or obj.is_class else obj.parent

            def replace(match: re.Match[str]) -> str:
                target = match["target"]
                shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
                found = None if match["bang"] else _resolve(target, scope, package)
                return f"[`{shown}`][{found.path}]" if found is not None else f"`{shown}`"

            obj.docstring.value = ROLE.sub(replace, obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(member, package, seen)
