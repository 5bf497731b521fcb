"""Every line accounted for (docs/formats.md "Every line accounted for"): what became of each line
of a source. Pure: no Django.

Each line read ends in exactly one fate, the strongest it was given: **refused** (reported on
stderr with its number), **imported** (a message, a tool move, a notice or feedback came from it,
or would have with ``--dry-run``; a message already imported counts too), **kept** (only its
source record), or **not kept** (a bookkeeping line of a conversation that had nothing to show,
docs/formats.md "What every import does"). A one-document source (a JSON array, a request body, an
envelope) is accounted for by its messages instead of its lines. The fates of lines take one byte
each, so the ledger of a file of a million lines is a megabyte.

**Not kept** also holds the lines of a conversation deleted since an import (docs/formats.md
"Deleted conversations stay deleted"): left out on purpose, reported once for the conversation;
and the OTLP trace lines without GenAI spans (``records.Covered``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: Fates, weakest first: a line keeps the strongest it is given.
READ: Final = 1  # read, nothing came of it (yet)
NOT_KEPT: Final = 2
KEPT: Final = 3
IMPORTED: Final = 4
REFUSED: Final = 5


@dataclass(frozen=True)
class LineCounts:
    """What became of a source's lines (or of a document's messages): ``read`` is always
    ``imported + kept + not_kept + refused``."""

    read: int = 0
    imported: int = 0
    kept: int = 0
    not_kept: int = 0
    refused: int = 0


class Ledger:
    """The fate of each line (by its 1-based number) and of each message of a one-document source
    (by its 0-based position)."""

    def __init__(self) -> None:
        self.first: int | None = None  # the number of ``fates[0]``
        self.fates = bytearray()
        self.entries: dict[int, int] = {}
        #: Whether the source was read as one document (set by the reader once the parser says
        #: so): its lines are then not counted, its messages are.
        self.document = False

    def _index(self, line: int) -> int:
        if self.first is None:
            self.first = line
        if line < self.first:  # never in practice: lines come in order
            self.fates[0:0] = bytes(self.first - line)
            self.first = line
        index = line - self.first
        if index >= len(self.fates):
            self.fates.extend(bytes(index + 1 - len(self.fates)))
        return index

    def read(self, line: int) -> None:
        """Line ``line`` was read."""
        self.mark(line, None, READ)

    def mark(self, line: int | None, entry: int | None, fate: int) -> None:
        """Give line ``line`` (or the message at ``entry`` of a document) ``fate``, unless it has
        a stronger one already. Both None: nothing to mark (a problem of the whole source)."""
        if line is not None:
            index = self._index(line)
            self.fates[index] = max(self.fates[index], fate)
        elif entry is not None:
            self.entries[entry] = max(self.entries.get(entry, 0), fate)

    def not_kept(self, line: int) -> None:
        """Line ``line`` was to be kept as a source record, and is not (bookkeeping only)."""
        index = self._index(line)
        if self.fates[index] == KEPT:
            self.fates[index] = NOT_KEPT

    def fate(self, line: int) -> int:
        """The fate of line ``line`` so far (0: not read)."""
        if self.first is None or not 0 <= line - self.first < len(self.fates):
            return 0
        return self.fates[line - self.first]

    def unaccounted(self) -> list[int]:
        """The lines read that nothing came of: each must be refused (a line is never dropped
        silently). In a one-document source, whose lines are its messages' text: its first line
        when the document gave no message and nothing else was decided of it (an empty list)."""
        if self.first is None:
            return []
        if self.document:
            return [] if self.entries or max(self.fates) != READ else [self.first]
        first = self.first
        return [first + i for i, fate in enumerate(self.fates) if fate == READ]

    def counts(self) -> LineCounts:
        """The totals: of the lines, or of a one-document source's messages (a document refused
        whole, or without messages, counts as one, with the fate of its first line)."""
        tally = [0] * (REFUSED + 1)
        if not self.document:
            for fate in self.fates:
                tally[fate] += 1
        elif self.entries:
            for fate in self.entries.values():
                tally[fate] += 1
        elif self.fates:
            tally[max(self.fates)] += 1
        imported, kept, not_kept, refused = (
            tally[IMPORTED],
            tally[KEPT],
            tally[NOT_KEPT],
            tally[REFUSED],
        )
        return LineCounts(
            read=imported + kept + not_kept + refused + tally[READ],
            imported=imported,
            kept=kept,
            not_kept=not_kept,
            refused=refused + tally[READ],
        )
