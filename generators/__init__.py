"""Not built yet: see issue 3. Nothing here is claimed to work."""
