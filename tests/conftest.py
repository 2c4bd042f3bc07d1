"""Suite-wide fixtures.

Upstream's published files (CRDs, default runtimes, SDK request bodies) are test data kept outside
the repository; ``upstream_data`` says where they are found and skips a test that needs a missing
one, naming it.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
