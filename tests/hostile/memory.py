"""A build that always runs out of memory."""


def build(source):
    raise MemoryError("pretend the allocator failed")
