"""A run's logs: read or followed, line by line, resuming where a dropped stream left off."""

import datetime
import heapq
import random
import struct
import time
from typing import Dict, Iterator, List, Optional, Tuple

import grpc

from . import errors
from ._proto import logs_pb2
from .connection import Client
from .runs import RunRef, _client, _name

__all__ = ["LogLine", "follow_run_logs", "get_run_logs", "unpack_lines", "LogCursorKeeper"]

# A packed line's header: sequence, time (µs since the epoch), dropped lines, text length.
_HEADER = struct.Struct(">qqqI")
# How long a follow tries to open its stream again with nothing received before it gives up.
_GIVE_UP_AFTER = 120.0
# A stream that stayed open this long counts as working: the next drop starts the pauses over.
_WORKED_FOR = 10.0


class LogLine:
    """One line a rank printed: its text (bytes decoded as UTF-8, undecodable bytes replaced;
    `raw` has them as printed), rank, node rank, stream ("stdout"/"stderr"), attempt, sequence
    (per rank and stream, from 0, without gaps), time, and `dropped_lines` (not 0 on a line the
    log service wrote for lines it dropped: the run's log quota). str(line) is its text.

    A follow may yield millions of these: the text is decoded, and the time made, when asked."""

    __slots__ = ("raw", "rank", "node_rank", "_stream", "attempt", "sequence", "micros",
                 "dropped_lines", "_text")

    def __init__(self, raw: bytes, rank: int, node_rank: int, stream: int, attempt: int,
                 sequence: int, micros: int, dropped_lines: int = 0):
        self.raw = raw
        self.rank = rank
        self.node_rank = node_rank
        self._stream = stream
        self.attempt = attempt
        self.sequence = sequence
        self.micros = micros  # microseconds since the epoch
        self.dropped_lines = dropped_lines
        self._text: Optional[str] = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.raw.decode("utf-8", "replace")
        return self._text

    @property
    def stream(self) -> str:
        return _STREAMS.get(self._stream, "?")

    @property
    def time(self) -> datetime.datetime:
        return _EPOCH + datetime.timedelta(microseconds=self.micros)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (f"LogLine(rank={self.rank}, stream={self.stream!r}, attempt={self.attempt}, "
                f"sequence={self.sequence}, text={self.text!r})")


_STREAMS = {logs_pb2.LOG_STREAM_STDOUT: "stdout", logs_pb2.LOG_STREAM_STDERR: "stderr"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def unpack_lines(group: "logs_pb2.PackedLogLines") -> List[LogLine]:
    """A PackedLogLines' lines. InvalidArgumentError for a group whose bytes do not hold whole
    lines."""
    data = group.lines
    rank, node_rank, stream, attempt = (group.rank, group.node_rank, group.stream,
                                        group.resumption_index)
    out: List[LogLine] = []
    append, unpack, size = out.append, _HEADER.unpack_from, _HEADER.size
    offset, end = 0, len(data)
    while offset < end:
        if offset + size > end:
            raise errors.InvalidArgumentError("packed log lines: a line's header is cut short")
        sequence, micros, dropped, length = unpack(data, offset)
        offset += size
        if offset + length > end:
            raise errors.InvalidArgumentError("packed log lines: a line's text is cut short")
        append(LogLine(data[offset:offset + length], rank, node_rank, stream, attempt, sequence,
                       micros, dropped))
        offset += length
    return out


def lines_in_display_order(message: "logs_pb2.LogLines") -> List[LogLine]:
    """A StreamLogs message's lines as they are shown: merged by time, each group's lines in
    their order (a line at the latest time of its group so far), ties by rank, then stream."""
    if not message.packed:
        return [LogLine(l.text, l.rank, l.node_rank, l.stream, l.resumption_index, l.sequence,
                        l.time.seconds * 1_000_000 + l.time.nanos // 1000, l.dropped_lines)
                for l in message.lines]
    if len(message.packed) == 1:
        return unpack_lines(message.packed[0])
    groups = []
    for group in message.packed:
        latest = None
        keyed = []
        for index, line in enumerate(unpack_lines(group)):
            latest = line.micros if latest is None else max(latest, line.micros)
            keyed.append((latest, group.rank, group.stream, index, line))
        groups.append(keyed)
    return [k[-1] for k in heapq.merge(*groups, key=lambda k: k[:4])]


class LogCursorKeeper:
    """Where a follow got to: the attempt, and each (rank, stream)'s next sequence, from the
    lines received (not their times: a node whose clock lags sends older lines later)."""

    def __init__(self) -> None:
        self.attempt: Optional[int] = None
        self.next: Dict[Tuple[int, int], int] = {}

    def started(self, start: "logs_pb2.LogCursor") -> None:
        self.attempt = start.resumption_index
        for p in start.positions:
            key = (p.rank, p.stream)
            self.next[key] = max(self.next.get(key, 0), p.next_sequence)

    def received(self, line: LogLine) -> None:
        if self.attempt is not None and line.attempt != self.attempt:
            self.next.clear()
        self.attempt = line.attempt
        key = (line.rank, line._stream)
        self.next[key] = max(self.next.get(key, 0), line.sequence + 1)

    def cursor(self) -> Optional["logs_pb2.LogCursor"]:
        if self.attempt is None:
            return None
        cursor = logs_pb2.LogCursor(resumption_index=self.attempt)
        for (rank, stream), sequence in sorted(self.next.items()):
            cursor.positions.add(rank=rank, stream=stream, next_sequence=sequence)
        return cursor


def _lines(run: RunRef, follow: bool, rank: Optional[int], node_rank: Optional[int],
           attempt: Optional[int], tail: Optional[int], client: Optional[Client]
           ) -> Iterator[LogLine]:
    c = _client(client)
    request = logs_pb2.GetLogsRequest(run_name=_name(run), follow=follow, packed=True)
    if rank is not None:
        request.rank = rank
    if node_rank is not None:
        request.node_rank = node_rank
    if attempt is not None:
        request.resumption_index = attempt
    if tail:
        request.tail = tail
    keeper = LogCursorKeeper()
    pause, failing_since = 0.0, None
    while True:
        opened = time.monotonic()
        stream = c.logs.StreamLogs(request, metadata=c.metadata())
        try:
            for message in stream:
                if message.HasField("start"):
                    keeper.started(message.start)
                for line in lines_in_display_order(message):
                    keeper.received(line)
                    failing_since = None
                    yield line
            return  # the attempt ended (a follow), or every line was read
        except grpc.RpcError as e:
            error = errors.from_rpc_error(e)
            if not follow or not isinstance(error, errors.UnavailableError):
                raise error from None
            # The server ended the follow (its maximum lifetime, a restart): go on from the
            # cursor, at once the first time, then after pauses doubling to 5 s; give up after
            # two minutes without a line.
            now = time.monotonic()
            if now - opened >= _WORKED_FOR:
                pause, failing_since = 0.0, None
            failing_since = failing_since if failing_since is not None else now
            if now - failing_since > _GIVE_UP_AFTER:
                raise error from None
            time.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(max(pause * 2, 0.25), 5.0)
        finally:
            stream.cancel()
        cursor = keeper.cursor()
        if cursor is not None:
            request.resume.CopyFrom(cursor)
            request.ClearField("tail")
            request.ClearField("resumption_index")


def follow_run_logs(run: RunRef, *, rank: Optional[int] = None,
                    node_rank: Optional[int] = None, attempt: Optional[int] = None,
                    tail: Optional[int] = None, client: Optional[Client] = None
                    ) -> Iterator[LogLine]:
    """The run's lines as they are printed, until its attempt (the latest, or `attempt`) ends:
    a generator of LogLine (str(line) is its text). Every rank's lines unless `rank` or
    `node_rank` is given; `tail` starts with the last N lines. A stream the server ends (its
    maximum lifetime, a restart) is opened again where it left off: no line twice, none lost."""
    return _lines(run, True, rank, node_rank, attempt, tail, client)


def get_run_logs(run: RunRef, *, rank: Optional[int] = None, node_rank: Optional[int] = None,
                 attempt: Optional[int] = None, tail: Optional[int] = None,
                 client: Optional[Client] = None) -> Iterator[LogLine]:
    """The lines printed so far, without waiting for more."""
    return _lines(run, False, rank, node_rank, attempt, tail, client)
