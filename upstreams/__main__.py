"""``python -m upstreams``: see upstreams/cli.py."""

import sys

from .cli import main

sys.exit(main())
