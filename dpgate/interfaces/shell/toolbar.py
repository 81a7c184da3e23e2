"""The bottom toolbar: who you are, what you have left, and what a query costs by default."""

from __future__ import annotations


def toolbar_text(analyst: str, epsilon_left: float, delta_left: float, session_epsilon: float, multiline: bool = False) -> str:
    text = f" {analyst} │ ε left {epsilon_left:.4g} │ δ left {delta_left:.3g} │ session ε {session_epsilon:g}"
    if multiline:
        text += " │ end with ;"
    return text + " │ .help "
