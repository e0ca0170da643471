"""A test implementation whose error messages are markup: the report must show them as text.
It is the bundled fast implementation, except that it rejects every gradient with a script."""

from gradient_conformance.implementations import fast

NAME = "hostile <b>impl</b>"
VERSION = "0"
CAPABILITIES = fast.CAPABILITIES
SCRIPT = "<script>document.body.innerHTML='PWNED'</script>"


def build(source: str):
    if "gradient" in source:
        raise ValueError(SCRIPT)
    return fast.build(source)
