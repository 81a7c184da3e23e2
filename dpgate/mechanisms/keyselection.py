"""DP key selection: which GROUP BY keys with no public domain may appear in the answer.

**Reference:** Korolova, Kenthapadi, Mishra, Ntoulas, "Releasing search queries and clicks
privately", WWW 2009; Wilson et al., arXiv 1909.01917, section 3 (τ-thresholding).

**Guarantee:** (ε, δ)-DP for neighbouring databases that differ in all rows of one subject.

**Sensitivity:** after bounding, a subject is counted in at most ``S = min(max_rows,
max_groups)`` keys, once each, so the vector of per-key subject counts has L1 sensitivity
``S`` [sens].

**Accuracy:** a key with ``n`` subjects is released with probability ``P(n + Z >= τ)``.

**Proof sketch:** keys present on both neighbours: discrete Laplace with scale ``S / ε`` on
the counts is ε-DP [noise], and thresholding is post-processing. Keys present on only one
neighbour have exactly one subject; each is released with probability
``P(1 + Z >= τ) = a^(τ-1) / (1 + a)``, and there are at most ``S`` of them, so τ is the
smallest integer with ``S * a^(τ-1) / (1 + a) <= δ`` (``threshold``) [delta].
"""

from __future__ import annotations

import math

import numpy as np

from dpgate import noise
from dpgate.mechanisms.base import KeySelection, Mechanism, spend


class KeySelector(Mechanism):
    NAME = "key_selection"
    VETTED = True

    def select(self, subjects: np.ndarray, selection: KeySelection, *, rng: np.random.Generator) -> np.ndarray:
        """Indices of the keys whose noisy subject count reaches the threshold."""
        spend(selection.epsilon, selection.delta, what="key selection")
        z = noise.discrete_laplace(selection.epsilon, selection.sensitivity, len(subjects), rng)  # [noise]
        return np.flatnonzero(subjects + z >= selection.threshold)  # [delta]


def threshold(epsilon: float, delta: float, groups: int) -> KeySelection:
    """Smallest threshold τ >= 2 with ``groups * P(Z >= τ - 1) <= delta`` (Z discrete Laplace) [delta].

    A key only one subject has reaches τ with probability ``P(1 + Z >= τ)``; a subject
    touches at most ``groups`` keys, so the chance that any of them appears is at most δ.
    """
    a = noise.discrete_laplace_alpha(epsilon, groups)
    if a == 0.0:  # ε / groups past ~745: P(Z >= 1) underflows to 0, so the smallest threshold already holds
        return KeySelection(epsilon=epsilon, delta=delta, sensitivity=groups, threshold=2)
    tau = max(2, math.ceil(math.log(delta * (1 + a) / groups) / math.log(a)) + 1)
    while tau > 2 and groups * noise.discrete_laplace_tail(epsilon, groups, tau - 2) <= delta:
        tau -= 1
    while groups * noise.discrete_laplace_tail(epsilon, groups, tau - 1) > delta:
        tau += 1
    return KeySelection(epsilon=epsilon, delta=delta, sensitivity=groups, threshold=tau)
