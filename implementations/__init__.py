"""Implementations of the IR bundled with the suite: `fast` (numpy float32)."""
