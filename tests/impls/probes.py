"""What the hostile implementations that probe the sandbox share (escapes.py, and
tests/hostile/reaches.py): each attempt's outcome, as "escaped" (it got something) or
"held" (an OSError, or nothing), which they say in their VERSION."""

escaped: list[str] = []
held: list[str] = []


def attempt(what: str, trying) -> None:
    try:
        result = trying()
    except OSError:
        held.append(what)
        return
    (escaped if result is not False else held).append(
        f"{what}" + (f" ({str(result)[:40]})" if result not in (None, True, False) else ""))


def said() -> str:
    return "escaped: " + (", ".join(escaped) or "nothing") + " | held: " + ", ".join(held)
