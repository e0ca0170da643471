"""Known divergences, told by what they are rather than where they were seen (docs/suite.md, "Known
divergences"): the entries of `--known FILE`, and the file `--write-known FILE` writes.

An entry is a signature as the run prints it (`CHECK / SUBJECT / KIND`), which names one
divergence of one check, or the name of a variant of the catalogue (`reversed-arrival`,
conformance/diagnosis/variants.py), which names a bug wherever it shows: a divergence is that
bug when the variant gives exactly what the implementation gave, compared as the check
compared. The plugin asks these questions; the checks only pass over what they are told is
known (tallies.Tally, `expected`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.reports.records import counted


@dataclass(frozen=True)
class KnownEntry:
    """One line of a known file: its text, its line, and what it names."""

    text: str
    line: int
    signature: tuple[str, str, str] | None = None
    variant: str | None = None

    @property
    def check(self) -> str | None:
        return self.signature[0] if self.signature else None


def parse_known(text: str, shown: str) -> list[KnownEntry]:
    """The entries of a known file whose text is `text` (`shown` is its name as typed), or
    ValueError naming the line and the problem."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#")[0].strip()
        if not entry:
            continue
        if "/" in entry:
            parts = tuple(part.strip() for part in entry.split("/"))
            if len(parts) != 3 or not parts[0] or not parts[2]:
                raise ValueError(f"{shown}, line {number}: {entry!r} is not a signature: "
                                 "CHECK / SUBJECT / KIND, as the run prints it after "
                                 "'signature:'")
            entries.append(KnownEntry(" / ".join(parts), number, signature=parts))  # type: ignore[arg-type]
        elif entry in CATALOGUE:
            entries.append(KnownEntry(entry, number, variant=entry))
        else:
            close = difflib.get_close_matches(entry, list(CATALOGUE), n=3, cutoff=0.75)
            raise ValueError(f"{shown}, line {number}: {entry!r} is neither a signature "
                             "(CHECK / SUBJECT / KIND) nor a variant of the catalogue"
                             + (f"; did you mean {', '.join(close)}?" if close else
                                " (gradient-conformance spec Diagnosis names them)"))
    return entries


class Known:
    """The entries of a run's known file, and the questions asked of them."""

    def __init__(self, entries: list[KnownEntry]):
        self.entries = entries
        self.variants = [e.variant for e in entries if e.variant]

    def explains(self, signature: tuple[str, str, str], variants: list[str]) -> str | None:
        """The entry that names a described divergence: its signature, or one of the
        variants its diagnosis found to give exactly the implementation's results."""
        for entry in self.entries:
            if entry.signature == tuple(signature) or (entry.variant and entry.variant in
                                                      variants):
                return entry.text
        return None

    def explains_finding(self, check: str, finding) -> str | None:
        """The entry that names a finding of `check`, as the check found it: its signature,
        or a known variant that gives exactly what the implementation gave."""
        from gradient_conformance.conformance.diagnosis.diagnose import reproduced_by
        from gradient_conformance.conformance.divergence import subject
        if any(e.signature for e in self.entries):
            found = self.explains((check, *subject(finding)), [])
            if found is not None:
                return found
        return reproduced_by(finding, self.variants) if self.variants else None

    def unmatched(self, matched: set[str]) -> list[KnownEntry]:
        return [e for e in self.entries if e.text not in matched]


def named_variants(d) -> list[str]:
    """The variants divergence `d`'s diagnosis names (each confirmed), as its record keeps
    them."""
    return [str(v.get("name")) for v in (d.diagnosis or {}).get("variants", [])
            if isinstance(v, dict)]


def entry_for(d) -> str | None:
    """The known entry that names divergence `d`: its variant where its diagnosis names
    exactly one (the bug wherever it shows), else its signature; None when that signature
    has no subject (a line for it would expect every failure of its check of that kind, the
    next bug's too)."""
    variants = named_variants(d)
    if len(variants) == 1 and variants[0] in CATALOGUE:
        return variants[0]
    return d.key if d.signature[1].strip() else None


def known_text(divergences, kept: list[str]) -> str:
    """A known file naming `kept` (entries of the run's own known file that it found again)
    and every divergence in `divergences`: by its variant where its diagnosis names exactly
    one (the bug wherever it shows), else by its signature; each with its summary."""
    lines = ["# Known divergences, written by gradient-conformance --write-known: a variant of",
             "# the catalogue or a signature (CHECK / SUBJECT / KIND) per line. Read by --known:",
             "# a divergence one of them names is expected; a new one still fails.", ""]
    seen = set(kept)
    lines += kept
    unnamed = []
    for d in divergences:
        variants = named_variants(d)
        entry = entry_for(d)
        if entry is None:
            unnamed.append(d)  # left out, and said below
            continue
        if entry in seen or not d.signature[0]:
            continue
        seen.add(entry)
        lines.append(f"# {' '.join(d.summary.split())[:90]}")
        if len(variants) > 1:
            # Which of them it is, the run could not tell: each gives these results.
            lines.append(f"# the diagnosis's candidates, each giving exactly these results: "
                         f"{', '.join(map(str, variants))} (one in place of the signature "
                         "names the bug wherever it shows)")
        lines.append(entry)
    if unnamed:
        checks = sorted({d.check for d in unnamed})
        lines += ["", f"# Left out: {counted(len(unnamed), 'divergence')} "
                  f"of {', '.join(checks)} whose signature names no subject (a line for it",
                  "# would expect every failure of the check of that kind): fix them, or",
                  "# name each by a signature with a subject or a variant."]
    return "\n".join(lines) + "\n"
