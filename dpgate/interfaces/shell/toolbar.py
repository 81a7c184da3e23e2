"""The bottom toolbar: who you are, what you have left, and what a query costs by default."""

from __future__ import annotations


def toolbar_text(
    analyst: str,
    epsilon_left: float,
    delta_left: float,
    session_epsilon: float,
    multiline: bool = False,
    session_delta: float | None = None,
) -> str:
    """Your quota left (ε and δ) and the session's defaults (ε, and the δ key selection spends)."""
    text = f" {analyst} │ ε left {epsilon_left:.4g} │ δ left {delta_left:.3g} │ session ε {session_epsilon:g}"
    if session_delta is not None:
        text += f", δ {session_delta:g}"
    if multiline:
        text += " │ end with ;"
    return text + " │ .help "
