"""The replica's log (hosts/consensus/entry_log.py): records the C path appended read back
as the entries they are, in order, wherever Python looks at the log."""

from __future__ import annotations

import pytest

from hosts.consensus.entry_log import RECORD, EntryLog
from hosts.consensus.log_wire import MAX_DATA, NOOP, Entry


def records(*entries: Entry) -> bytes:
    return b"".join(RECORD.pack(e.client, e.req, len(e.data), e.data) for e in entries)


def test_records_read_back_as_the_entries_they_are_after_what_python_logged():
    log = EntryLog([NOOP])
    a, b, c = Entry(0, 1, b"a"), Entry(1, 7, b""), Entry(2, 9, b"x" * MAX_DATA)
    log.extend_records(records(a, b), 2)
    log.extend_records(records(c), 1)
    assert len(log) == 4
    assert log == [NOOP, a, b, c] and log[1:] == [a, b, c] and log[-1] == c
    log.append(Entry(3, 3, b"d"))  # after the records, not before them
    assert [e.req for e in log] == [0, 1, 7, 9, 3]


def test_a_decided_entry_overwrites_a_logged_record_in_place():
    log = EntryLog()
    log.extend_records(records(Entry(0, 1, b"a"), Entry(0, 2, b"b")), 2)
    log[0] = NOOP
    assert log == EntryLog([NOOP, Entry(0, 2, b"b")]) and log != [NOOP]


def test_a_batch_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="2 records take"):
        EntryLog().extend_records(records(Entry(0, 1, b"a")), 2)
