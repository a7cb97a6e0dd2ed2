"""The hooks' view of the window table: hook state lives under its own prefix and can
never touch a pane, a series or a seen mark."""

from __future__ import annotations

from typing import Any

import pytest

from streamproc.monitor.windows.report import EXTENSION_PREFIX, ExtensionState


def test_hook_state_is_kept_apart_from_the_window_state() -> None:
    table: dict[str, Any] = {'p|["t","b","m"]|0': {"answers": 1}, "s|e1": [0, 1.0]}
    state = ExtensionState(table)
    state['p|["t","b","m"]|0'] = {"firing": True}  # a hook choosing a pane-like name
    assert table['p|["t","b","m"]|0'] == {"answers": 1}
    assert table[EXTENSION_PREFIX + 'p|["t","b","m"]|0'] == {"firing": True}
    assert list(state) == ['p|["t","b","m"]|0'] and len(state) == 1
    assert "s|e1" not in state and 'p|["t","b","m"]|0' in state
    del state['p|["t","b","m"]|0']
    assert table == {'p|["t","b","m"]|0': {"answers": 1}, "s|e1": [0, 1.0]}
    with pytest.raises(KeyError):
        state["s|e1"]
