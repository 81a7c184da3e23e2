"""The mechanism protocol and the noisy-column value every mechanism returns.

A mechanism is a small class with a ``NAME``, a ``VETTED`` flag and ``release``; its module
docstring states, under fixed headings, the reference, the guarantee and neighbouring
relation, the sensitivity, the accuracy (error bars) and a proof sketch citing ``[labels]``
on the code lines that implement each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class NoisyColumn:
    """Noisy values with their (1 - alpha) intervals, one entry per released key."""

    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    integer: bool
    mechanism: str
    epsilon: float
    scale: str  # human-readable noise description, e.g. "discrete Laplace, sensitivity 1, ε=0.5"


class Mechanism:
    NAME = "base"
    VETTED = True
