"""Calls sys.exit at import."""

import sys

sys.exit(3)
