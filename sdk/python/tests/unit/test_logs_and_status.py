"""Packed lines decoded in display order, a follow's cursor, and which statuses a wait
accepts."""

import struct

import pytest

from tessera_sdk import InvalidArgumentError, RunStatus
from tessera_sdk._proto import logs_pb2
from tessera_sdk.logs import LogCursorKeeper, lines_in_display_order, unpack_lines


def packed(rank, stream, lines, attempt=0):
    data = b"".join(struct.pack(">qqqI", seq, micros, 0, len(text)) + text
                    for seq, micros, text in lines)
    return logs_pb2.PackedLogLines(run_id="r", resumption_index=attempt, rank=rank,
                                   stream=stream, lines=data)


def test_packed_lines_merge_by_time_each_group_in_its_order():
    message = logs_pb2.LogLines(packed=[
        packed(0, logs_pb2.LOG_STREAM_STDOUT, [(0, 10, b"a0"), (1, 30, b"a1"), (2, 20, b"a2")]),
        packed(1, logs_pb2.LOG_STREAM_STDOUT, [(0, 25, b"b0"), (1, 40, "é".encode())]),
    ])
    lines = lines_in_display_order(message)
    # a2 printed at 20 comes after a1 (30) in its group, so at 30: after b0 (25).
    assert [l.text for l in lines] == ["a0", "b0", "a1", "a2", "é"]
    assert lines[1].rank == 1 and lines[1].stream == "stdout" and lines[1].sequence == 0


def test_bytes_that_are_not_text_are_replaced_and_kept_raw():
    [line] = unpack_lines(packed(0, logs_pb2.LOG_STREAM_STDERR, [(7, 1, b"\xff\x00x")]))
    assert line.text == "\ufffd\x00x" and line.raw == b"\xff\x00x" and line.stream == "stderr"


def test_a_cut_packed_group_is_an_error():
    group = packed(0, logs_pb2.LOG_STREAM_STDOUT, [(0, 1, b"hello")])
    group.lines = group.lines[:-1]
    with pytest.raises(InvalidArgumentError, match="cut short"):
        unpack_lines(group)


def test_the_cursor_is_the_next_sequence_of_each_stream_from_the_start():
    keeper = LogCursorKeeper()
    assert keeper.cursor() is None
    start = logs_pb2.LogCursor(resumption_index=2)
    start.positions.add(rank=1, stream=logs_pb2.LOG_STREAM_STDOUT, next_sequence=40)
    keeper.started(start)
    message = logs_pb2.LogLines(packed=[
        packed(0, logs_pb2.LOG_STREAM_STDOUT, [(5, 1, b"x"), (6, 2, b"y")], attempt=2)])
    for line in lines_in_display_order(message):
        keeper.received(line)
    cursor = keeper.cursor()
    assert cursor.resumption_index == 2
    assert [(p.rank, p.stream, p.next_sequence) for p in cursor.positions] == [
        (0, logs_pb2.LOG_STREAM_STDOUT, 7), (1, logs_pb2.LOG_STREAM_STDOUT, 40)]


@pytest.mark.parametrize("now, target, reached", [
    (RunStatus.QUEUED, RunStatus.RUNNING, False),
    (RunStatus.RUNNING, RunStatus.RUNNING, True),
    (RunStatus.TERMINATING, RunStatus.RUNNING, True),
    (RunStatus.COMPLETED, RunStatus.RUNNING, True),   # it ran: a wait for RUNNING is over
    (RunStatus.FAILED, RunStatus.QUEUED, True),
    (RunStatus.RUNNING, RunStatus.COMPLETED, False),
    (RunStatus.FAILED, RunStatus.COMPLETED, False),   # the wait raises RunEndedError instead
])
def test_which_statuses_a_wait_accepts(now, target, reached):
    assert now.reached(target) == reached


def test_statuses_parse_in_any_spelling():
    assert RunStatus.parse("running") is RunStatus.RUNNING
    assert RunStatus.parse("RUN_STATUS_FAILED") is RunStatus.FAILED
    with pytest.raises(InvalidArgumentError, match="unknown run status"):
        RunStatus.parse("done")
