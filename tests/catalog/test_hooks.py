"""What the catalog needs from later stages (Spark sources, release coding) is installed by the
package. The direction of the catalog's imports is ``tests/test_layout.py``'s stage check."""

from __future__ import annotations

import inspect

import pytest

import dpgate  # noqa: F401 - installs the owner's hooks
from dpgate.catalog import hooks


@pytest.mark.parametrize("name, protocol", [("spark", hooks.SparkSources), ("release_coding", hooks.ReleaseCoding)])
def test_the_installed_hooks_provide_every_declared_function(name, protocol):
    provided = getattr(hooks, name)()
    declared = [n for n, _ in inspect.getmembers(protocol, inspect.isfunction) if not n.startswith("_")]
    assert declared
    for fn in declared:
        assert callable(getattr(provided, fn, None)), f"{name} hook lacks {fn}"


def test_a_missing_hook_is_an_internal_error(monkeypatch):
    monkeypatch.setattr(hooks, "_providers", {})
    with pytest.raises(dpgate.InternalError, match="not installed"):
        hooks.spark()
