"""``python -m kubetrain.initializers dataset|model``."""

from __future__ import annotations

import sys

from .main import main

sys.exit(main())
