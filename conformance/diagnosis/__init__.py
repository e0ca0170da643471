"""Diagnosis: what an implementation did instead of the spec. docs/diagnosis.md, "Diagnosis".

- variants.py: the catalogue, the spec with one choice made otherwise, as data.
- diagnose.py: a divergent case re-run under the variants; those that give exactly the
  implementation's outcome are named.
"""
