"""``python -m filtex_broker`` with the door check replaced by the scan alone (a benchmark's
baseline).

For ``bench/bench_broker.py --door-check``: the broker as it would be without the door
check, every message only scanned for its layout (``RawMessageView``, as before the check), so
that the check's own cost is measured against the same broker in the same run. Not a product
switch: it exists only here, in the benchmarks.
"""

from __future__ import annotations

import sys

from filtex_broker.__main__ import main
from filtex_proton.amqp import RawMessageView
from filtex_proton.plugin import FilterMessage


def _scan_only(self: FilterMessage) -> RawMessageView:
    """The layout scan only: what ``FilterMessage.view`` did before the door check."""
    view = self._view = RawMessageView(self.data)
    return view


FilterMessage.validate = _scan_only  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
