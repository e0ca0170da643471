"""Reports of a conformance run: the records (records.py), the HTML page (html.py and
templates/), and the versioned JSON. docs/reports.md, "Reports"."""
