"""The mechanism registry: one module per mechanism, named after the algorithm.

``MECHANISMS`` maps each mechanism's name (for a synthesizer, its SQL name after ``USING``) to
its class; query classes find a mechanism with ``lookup``, which is also the one place an
unvetted mechanism (``VETTED = False``) is refused unless the data owner allowed it.
"""

from __future__ import annotations

from dpgate import errors
from dpgate.mechanisms.base import Mechanism, Synthesizer
from dpgate.mechanisms.diffpart import DiffPart
from dpgate.mechanisms.keyselection import KeySelector
from dpgate.mechanisms.ladder import GlobalSensitivityLaplace, LadderMechanism, SmoothSensitivityCauchy
from dpgate.mechanisms.laplace import LaplaceCounting
from dpgate.mechanisms.mst import MST
from dpgate.mechanisms.privbayes import Independent, PrivBayes
from dpgate.mechanisms.privtree import PrivTree, PrivTreeMarkov
from dpgate.mechanisms.setmarginals import SetMarginals
from dpgate.mechanisms.supermodular import Supermodular

MECHANISMS: dict[str, type[Mechanism]] = {
    cls.NAME: cls
    for cls in (
        LaplaceCounting,
        KeySelector,
        LadderMechanism,
        GlobalSensitivityLaplace,
        SmoothSensitivityCauchy,
        MST,
        PrivBayes,
        Independent,
        PrivTree,
        PrivTreeMarkov,
        DiffPart,
        SetMarginals,
        Supermodular,
    )
}


def lookup(name: str, *, allow_unvetted: bool = False, table: str | None = None) -> type[Mechanism]:
    """The class registered as ``name``; an unvetted one only with ``allow_unvetted`` (the owner's
    ``experimental = true`` for ``table``)."""
    cls = MECHANISMS.get(name)
    if cls is None:
        raise errors.InternalError(f"no mechanism named {name!r} is registered")
    if not cls.VETTED and not allow_unvetted:
        raise errors.PolicyError(
            f"USING {name} is an experimental mechanism ({cls.STATUS}), and the owner has not "
            f"enabled experimental mechanisms for {table}", code="DP328",
            hint=f"the data owner sets experimental = true in [tables.{table}] (or Owner.protect(..., "
                 "experimental=True)); USING mst is the proved default",
        )  # fmt: skip
    return cls


def synthesizer(name: str, *, allow_unvetted: bool = False, table: str | None = None) -> Synthesizer:
    """The synthesizer registered as ``name`` (``lookup``'s checks), ready to run."""
    cls = lookup(name, allow_unvetted=allow_unvetted, table=table)
    if not issubclass(cls, Synthesizer):
        raise errors.InternalError(f"{name} is not a synthesizer")
    return cls()


__all__ = ["MECHANISMS", "KeySelector", "LaplaceCounting", "lookup", "synthesizer"]
