"""A server of the protocol that asks for the program as JSON (SPEC.md, "The protocol") and
answers each build with what it was sent: ok when a program came with it, an error naming
what is missing otherwise. Its argument, if any, is what its first reply asks for.
tests/test_json_program.py."""

import json
import sys

wants = sys.argv[1] if len(sys.argv) > 1 else "json"
first = True
for line in sys.stdin:
    request = json.loads(line)
    if "build" in request:
        program = request.get("program")
        if request["build"].strip() and not isinstance(program, dict):
            reply = {"ok": False, "error": "no program as JSON came with the build"}
        elif isinstance(program, dict) and "error" in program:
            reply = {"ok": False, "error": program["error"]}
        else:
            count = len(program["body"]) if isinstance(program, dict) else 0
            reply = {"ok": True, "note": f"{count} statements"}
    else:
        reply = {"ok": False, "error": "builds only"}
    if first:
        reply.update(name="json-server", program=wants)
        first = False
    print(json.dumps({"id": request["id"], **reply}), flush=True)
