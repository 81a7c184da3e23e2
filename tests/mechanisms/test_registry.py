"""The mechanism registry: every mechanism class is registered, and unvetted ones are gated in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import dpgate.mechanisms as mechanisms
from dpgate import errors
from dpgate.mechanisms.base import Mechanism, Synthesizer


def _mechanism_classes() -> set[type]:
    found = set()
    for info in pkgutil.iter_modules(mechanisms.__path__):
        module = importlib.import_module(f"dpgate.mechanisms.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Mechanism) and obj not in (Mechanism, Synthesizer) and obj.__module__ == module.__name__:
                found.add(obj)
    return found


def test_every_mechanism_class_is_registered_under_its_name():
    assert _mechanism_classes() == set(mechanisms.MECHANISMS.values())
    assert all(mechanisms.MECHANISMS[cls.NAME] is cls for cls in _mechanism_classes())


def test_an_unvetted_mechanism_is_refused_unless_the_owner_allowed_it():
    unvetted = [name for name, cls in mechanisms.MECHANISMS.items() if not cls.VETTED]
    assert "supermodular" in unvetted and "smooth_cauchy" in unvetted
    for name in unvetted:
        with pytest.raises(errors.PolicyError) as e:
            mechanisms.lookup(name, table="t")
        assert e.value.code == "DP328" and "experimental = true" in e.value.hint
        assert mechanisms.lookup(name, allow_unvetted=True) is mechanisms.MECHANISMS[name]


def test_lookup_of_an_unknown_name_is_a_bug_not_a_key_error():
    with pytest.raises(errors.InternalError):
        mechanisms.lookup("nope")
    with pytest.raises(errors.InternalError):
        mechanisms.synthesizer("laplace")


def test_every_synthesizer_has_the_one_signature():
    expected = inspect.signature(Synthesizer.synthesize).parameters.keys()
    for cls in mechanisms.MECHANISMS.values():
        if issubclass(cls, Synthesizer):
            assert inspect.signature(cls.synthesize).parameters.keys() == expected, cls
