"""Key bindings: Enter runs a complete statement (ending with ;) or a dot-command, else adds a line."""

from __future__ import annotations

import os

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.filters import Condition, has_completions, is_searching
from prompt_toolkit.key_binding import KeyBindings

from dpgate.interfaces.shell.commands import is_command


def statement_complete(text: str) -> bool:
    """Enter runs it: a statement ending with ';', a dot-command or a psql meta-command (``\\q``)."""
    stripped = text.strip()
    return not stripped or is_command(stripped) or stripped.endswith(";")


def bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter", filter=~has_completions & ~is_searching)
    def _(event):
        buf = event.current_buffer
        if statement_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.insert_text("\n")

    @kb.add("enter", filter=has_completions & ~is_searching)
    def _(event):
        buf = event.current_buffer
        if buf.complete_state and buf.complete_state.current_completion:
            buf.apply_completion(buf.complete_state.current_completion)
        elif statement_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.complete_state = None
            buf.insert_text("\n")

    @kb.add("tab", filter=~is_searching)
    def _(event):
        """Complete at once when there is one candidate (or a common prefix); else open the menu."""
        buf = event.current_buffer
        if buf.complete_state:
            buf.complete_next()
            return
        if buf.completer is None:
            return
        found = list(buf.completer.get_completions(buf.document, CompleteEvent(completion_requested=True)))
        if len(found) == 1:
            buf.apply_completion(found[0])
            return
        texts = [c.text for c in found if c.start_position == found[0].start_position] if found else []
        common = os.path.commonprefix(texts) if texts else ""
        typed = -found[0].start_position if found else 0
        if len(common) > typed:
            buf.insert_text(common[typed:])
        elif found:
            buf.start_completion(select_first=False)

    @kb.add("escape", "enter")
    def _(event):
        event.current_buffer.validate_and_handle()

    @kb.add("c-c")
    def _(event):
        event.current_buffer.reset()

    return kb


__all__ = ["Condition", "bindings", "statement_complete"]
