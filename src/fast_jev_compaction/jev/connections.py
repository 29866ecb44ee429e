"""The connection gate of ``fast-jev serve``: a stalled client never holds a worker.

A plain threading server gives every connection a thread the moment it is accepted, so clients
that connect and send nothing (or half a request line) pile up threads without bound. Here one
gate thread waits, with a selector, for each connection's request head to arrive in full; only
then does the connection go to a bounded pool of workers, with the bytes already read handed
over. A worker answers that one request; a connection kept alive goes back to the gate with
whatever it sent beyond it, and waits there for its next head like a new one. A connection whose
head does not arrive within the timeout is closed, and so is the oldest one once too many are
waiting; once the workers and their queue are full, a whole request is answered 503 at once. In
a worker every socket read has the same timeout.

Standard library only.
"""

from __future__ import annotations

import queue
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

DEFAULT_WORKERS = 8
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_WAITING = 1024
QUEUED_PER_WORKER = 4  # whole requests that may wait for a free worker, per worker
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
_HEAD_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
HEAD_LIMIT = 64 * 1024  # the request line and headers; more is refused with 431
_HEAD_END = (b"\r\n\r\n", b"\n\n")


@dataclass
class _Waiting:
    address: Any
    since: float = field(default_factory=time.monotonic)
    head: bytearray = field(default_factory=bytearray)


class GatedHTTPServer(HTTPServer):
    """An ``HTTPServer`` whose connections reach ``workers`` threads only with a whole head."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        workers: int = DEFAULT_WORKERS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_waiting: int = DEFAULT_MAX_WAITING,
    ) -> None:
        if workers < 1 or timeout_s <= 0 or max_waiting < 1:
            raise ValueError("workers and max_waiting must be >= 1 and timeout_s > 0")
        super().__init__(address, handler)
        self.timeout_s = float(timeout_s)
        self.max_waiting = max_waiting
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fast-jev-serve")
        self._max_in_pool = workers * (1 + QUEUED_PER_WORKER)
        self._in_pool = 0  # submitted and not finished; changed under _count_lock
        self._count_lock = threading.Lock()
        self._heads: dict[socket.socket, bytes] = {}
        self._kept: dict[socket.socket, bytes] = {}  # kept alive by their handler, with what is unread
        self._arrivals: queue.SimpleQueue[tuple[socket.socket, Any, bytes]] = queue.SimpleQueue()
        self._waiting: dict[socket.socket, _Waiting] = {}
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._closing = threading.Event()
        self._gate = threading.Thread(target=self._run_gate, name="fast-jev-serve-gate", daemon=True)
        self._gate.start()

    # Called on the accepting thread (serve_forever) for each new connection.
    def process_request(self, request: Any, client_address: Any) -> None:
        self._arrivals.put((request, client_address, b""))
        self._wake()

    def take_head(self, connection: socket.socket) -> bytes:
        """The bytes the gate read from ``connection`` (called once, by its handler)."""
        return self._heads.pop(connection, b"")

    def keep_alive(self, connection: socket.socket, unread: bytes) -> None:
        """Called by a handler whose connection stays open: once the handler is done, it goes
        back to the gate with ``unread``, the bytes it received beyond its request."""
        self._kept[connection] = unread

    def server_close(self) -> None:
        super().server_close()
        self._closing.set()
        self._wake()
        self._gate.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._wake_read.close()
        self._wake_write.close()

    def _wake(self) -> None:
        try:
            self._wake_write.send(b"\0")
        except OSError:  # full (the gate is already awake) or closed (shutting down)
            pass

    def _run_gate(self) -> None:
        try:
            while not self._closing.is_set():
                for key, _ in self._selector.select(timeout=min(0.25, self.timeout_s / 4)):
                    if key.fileobj is self._wake_read:
                        self._admit()
                    else:
                        self._read_head(key.fileobj)  # type: ignore[arg-type]
                self._drop_overdue()
        finally:
            for connection in list(self._waiting):
                self._drop(connection)
            self._selector.close()

    def _admit(self) -> None:
        try:
            while self._wake_read.recv(4096):
                pass
        except BlockingIOError:  # drained
            pass
        while True:
            try:
                connection, address, unread = self._arrivals.get_nowait()
            except queue.Empty:
                return
            if self._closing.is_set():
                self.shutdown_request(connection)
                continue
            connection.setblocking(False)
            self._waiting[connection] = _Waiting(address, head=bytearray(unread))
            self._selector.register(connection, selectors.EVENT_READ)
            while len(self._waiting) > self.max_waiting:  # the oldest waiter makes room
                self._drop(next(iter(self._waiting)))
            if unread and connection in self._waiting:  # a pipelined request may be whole already
                self._take_if_whole(connection, self._waiting[connection])

    def _read_head(self, connection: socket.socket) -> None:
        waiting = self._waiting.get(connection)
        if waiting is None:
            return
        try:
            chunk = connection.recv(HEAD_LIMIT)
        except BlockingIOError:
            return
        except OSError:
            self._drop(connection)
            return
        if not chunk:
            self._drop(connection)
            return
        waiting.head += chunk
        self._take_if_whole(connection, waiting)

    def _take_if_whole(self, connection: socket.socket, waiting: _Waiting) -> None:
        """Hand ``connection`` to a worker once its head is whole (refuse it when too large)."""
        if any(end in waiting.head for end in _HEAD_END):
            self._selector.unregister(connection)
            del self._waiting[connection]
            with self._count_lock:
                full = self._in_pool >= self._max_in_pool
                if not full:
                    self._in_pool += 1
            if full:
                self._refuse(connection, _BUSY)
                return
            connection.setblocking(True)
            connection.settimeout(self.timeout_s)
            self._heads[connection] = bytes(waiting.head)
            self._pool.submit(self._work, connection, waiting.address)
        elif len(waiting.head) > HEAD_LIMIT:
            self._refuse(connection, _HEAD_TOO_LARGE)

    def _refuse(self, connection: socket.socket, reply: bytes) -> None:
        try:
            connection.send(reply)  # non-blocking: a client that does not read gets nothing
        except OSError:
            pass
        self._drop(connection)

    def _work(self, connection: socket.socket, address: Any) -> None:
        try:
            self.finish_request(connection, address)
        except Exception:
            self.handle_error(connection, address)
        finally:
            self._heads.pop(connection, None)
            unread = self._kept.pop(connection, None)
            with self._count_lock:
                self._in_pool -= 1
            if unread is None:
                self.shutdown_request(connection)
            else:
                self._arrivals.put((connection, address, unread))
                self._wake()

    def _drop_overdue(self) -> None:
        cutoff = time.monotonic() - self.timeout_s
        for connection, waiting in list(self._waiting.items()):
            if waiting.since < cutoff:
                self._drop(connection)

    def _drop(self, connection: socket.socket) -> None:
        self._waiting.pop(connection, None)
        try:
            self._selector.unregister(connection)
        except (KeyError, ValueError):
            pass
        self.shutdown_request(connection)


class ConnectionReader:
    """A connection's bytes for one request, as the handler reads them (``readline``, ``read``,
    ``read1``): the head the gate already read, then the socket. What is left when the request
    is done (a pipelined next one) is :meth:`unread`, for the gate. Unbuffered beyond that: no
    byte of the next request is kept anywhere else."""

    def __init__(self, head: bytes, connection: socket.socket) -> None:
        self._buffer = bytearray(head)
        self._connection = connection
        self.closed = False

    def _fill(self) -> bool:
        chunk = self._connection.recv(1 << 16)  # the connection's timeout applies
        self._buffer += chunk
        return bool(chunk)

    def _take(self, count: int) -> bytes:
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken

    def readline(self, limit: int = -1) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0 and (limit < 0 or end < limit):
                return self._take(end + 1)
            if 0 <= limit <= len(self._buffer) or not self._fill():
                return self._take(len(self._buffer) if limit < 0 else limit)

    def read(self, size: int = -1) -> bytes:
        while (size < 0 or len(self._buffer) < size) and self._fill():
            pass
        return self._take(len(self._buffer) if size < 0 else size)

    def read1(self, size: int = -1) -> bytes:
        if not self._buffer:
            self._fill()
        return self._take(len(self._buffer) if size < 0 else size)

    def unread(self) -> bytes:
        return self._take(len(self._buffer))

    def close(self) -> None:
        self.closed = True  # the socket is the server's to close or keep
