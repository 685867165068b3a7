"""The wire format between a grading kernel (`autograder.checker`) and the judge server
(`autograder.judge`): one request and one answer per connection, each a length-prefixed JSON
header and a byte body (the request's body: the cloudpickled function; the answer's: empty).
Sizes are bounded on receipt, and a receipt can have a deadline for the whole message (not per
read: a peer that trickles a byte now and then still runs out of time)."""

from __future__ import annotations

import json
import struct
import time

MAX_HEADER = 1 << 16
MAX_BODY = 64 * 2**20  # a cloudpickled function with what it closes over


def _recv_exact(sock, n: int, deadline: float | None = None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the message did not arrive in time")
            sock.settimeout(left)
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("short read")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def send_message(sock, header: dict, body: bytes = b"") -> None:
    head = json.dumps(header).encode()
    sock.sendall(struct.pack("!II", len(head), len(body)) + head + body)


def recv_message(sock, deadline: float | None = None) -> tuple[dict, bytes]:
    """One message; `deadline` (time.monotonic()) bounds its whole receipt."""
    n_head, n_body = struct.unpack("!II", _recv_exact(sock, 8, deadline))
    if n_head > MAX_HEADER or n_body > MAX_BODY:
        raise ValueError("message too large")
    header = json.loads(_recv_exact(sock, n_head, deadline))
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    return header, _recv_exact(sock, n_body, deadline)
