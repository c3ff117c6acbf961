"""Every public example in the library runs, under the package's one import name."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import deltaextras

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(deltaextras.__path__, "deltaextras.")
    if not m.name.endswith("__main__") and not m.ispkg
)


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} example(s) failed in {name}"


def test_public_names_exist() -> None:
    missing = [name for name in deltaextras.__all__ if not hasattr(deltaextras, name)]
    assert not missing, f"__all__ names {missing} that the package does not define"


def test_documented_imports_resolve() -> None:
    """Every ``from deltaextras... import ...`` in the README and docs runs."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"^\s*from (deltaextras[\w.]*) import \(?([\w, ]+)\)?\s*(?:#.*)?$", re.MULTILINE)
    seen = 0
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for module, names in pattern.findall(doc.read_text()):
            mod = importlib.import_module(module)
            for name in (n.strip() for n in names.split(",") if n.strip()):
                assert hasattr(mod, name), f"{doc.name}: {module} has no {name}"
                seen += 1
    assert seen >= 5
