"""Writing records through the aiokafka producer a FastStream broker owns.

FastStream's publish path (publish command, middlewares, header rendering) costs ~3x
what aiokafka's `send` does per record (measured: 54 vs 15 µs with the Prometheus
middleware). Hot paths — the runner's event stream, ingress batches — hand records to
the broker's own producer instead (`internals.producer_of`): same connection, same
settings, same lifecycle.
"""

from __future__ import annotations

from pydantic import BaseModel

Headers = list[tuple[str, bytes]]
JSON = b"application/json"


_HEADERS: dict[str, Headers] = {}  # per record type, built once; the producer only reads them


def encode_record(record: BaseModel, key: str) -> tuple[bytes, bytes, Headers]:
    """(key, value, headers) of a record as every service writes it: JSON, with its `type`."""
    kind = str(getattr(record, "type", ""))
    headers = _HEADERS.get(kind)
    if headers is None:
        headers = _HEADERS[kind] = [("content-type", JSON), ("type", kind.encode())]
    return key.encode(), record.model_dump_json().encode(), headers
