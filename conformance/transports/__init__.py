"""How the suite calls an implementation it does not trust. SPEC.md, "The protocol" and "Statuses";
docs/isolation.md, "Isolation".

- loading.py: `load(spec)`, the `Implementation` the checks see, and its CAPABILITIES.
- description.py: what a module says of itself (NAME, VERSION, CAPABILITIES, functions), one
  description for every transport.
- calling.py: calling a Python module's functions, and the status each call earns.
- in_process.py, worker.py (with worker_process.py, the far side), jsonlines.py (the
  JSON-lines client and server): the three transports.
- process.py: a child process with deadlines, a bounded output tail, and a sure kill.
"""
