"""The interactive shell: a budget-aware SQL REPL in the tradition of litecli and pgcli.

Split like litecli: ``app`` (the session and loop), ``commands`` (dot-commands),
``completer`` (pure suggestions + the prompt-toolkit wrapper), ``keys``, ``toolbar`` and
``lexer`` (highlighting with sqlglot's tokenizer); tables print through ``dpgate.interfaces.render``.
"""

from __future__ import annotations

from dpgate.interfaces.shell.app import Shell, run_shell

__all__ = ["Shell", "run_shell"]
