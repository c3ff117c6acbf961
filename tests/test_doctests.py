"""Every public example in the library runs, under the package's one import name."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import deltaextras

MODULES = sorted(
    m.name for m in pkgutil.iter_modules(deltaextras.__path__, "deltaextras.") if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} example(s) failed in {name}"
