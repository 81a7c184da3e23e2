"""The synthesizer registry: one entry per USING name, each backed by a registered mechanism."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from dpgate import mechanisms
from dpgate.mechanisms.base import CodedRows, Synthesizer
from dpgate.queries import synthetic


def test_every_synthesizer_name_is_a_registered_synthesizer_mechanism():
    for name, entry in synthetic.SYNTHESIZERS.items():
        assert entry.name == name
        assert issubclass(mechanisms.MECHANISMS[name], Synthesizer)
    assert synthetic.DEFAULT_MECHANISM in synthetic.SYNTHESIZERS


def test_the_synthetic_class_never_compares_a_mechanism_name():
    """It looks synthesizers up in SYNTHESIZERS; a string compared with ``==`` or ``in`` is a switch."""
    tree = ast.parse(Path(synthetic.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            consts = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant | ast.Tuple)]
            names = {c.value for c in consts if isinstance(c, ast.Constant)} & set(synthetic.SYNTHESIZERS)
            assert not names, ast.unparse(node)


def test_a_tabular_synthesizer_reports_the_epsilon_it_consumed():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, size=(200, 2))
    for name in ("mst", "privbayes", "independent"):
        out = mechanisms.synthesizer(name).synthesize(CodedRows(codes, (3, 3)), epsilon=1.0, rng=rng, options={})
        assert out.epsilon == 1.0 and out.release.noisy_rows > 0
