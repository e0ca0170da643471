"""The conformance suite (issue 4). Being built: so far only `protocol.py`, the client of the
JSON-lines protocol behind `--impl=cmd:...`. The pytest plugin and its checks are not built."""
