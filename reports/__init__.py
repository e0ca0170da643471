"""Not built yet: see issue 5. Nothing here is claimed to work."""
