"""hta-tui: PyTorch profiler (Kineto) traces analysed like Holistic Trace Analysis, in a
terminal, from the command line (`hta-tui report`) or from Python:

    from hta_tui import TraceAnalysis
"""

from __future__ import annotations

import logging
from typing import Any

# Silent unless a front end names a log file (`--log`): tracebacks never reach the terminal
# through Python's last-resort handler.
logging.getLogger("hta_tui").addHandler(logging.NullHandler())

__version__ = "0.1.0"
__all__ = ["TraceAnalysis", "TraceDiff", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import hta_tui.trace...` in a parser worker does not load every analysis.
    if name in ("TraceAnalysis", "TraceDiff"):
        from hta_tui import api

        return getattr(api, name)
    raise AttributeError(name)
