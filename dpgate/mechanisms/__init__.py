"""The mechanism registry: one module per mechanism, named after the algorithm."""

from __future__ import annotations

from dpgate.mechanisms.keyselection import KeySelector
from dpgate.mechanisms.laplace import LaplaceCounting

MECHANISMS = {
    LaplaceCounting.NAME: LaplaceCounting,
    KeySelector.NAME: KeySelector,
}

__all__ = ["MECHANISMS", "KeySelector", "LaplaceCounting"]
