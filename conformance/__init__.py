"""Not built yet: see issue 4. Nothing here is claimed to work."""
