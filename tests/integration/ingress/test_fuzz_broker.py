"""1,000 records, valid and fuzzed bad ones mixed, through one running ingress.

Every bad record lands in `dlq` with a reason, every valid one starts exactly one run,
and the service stays alive (ready) throughout. The bad records are drawn with
hypothesis: wrong types, missing fields, huge strings, invalid UTF-8, non-JSON.
"""

from __future__ import annotations

import json
import random
import warnings

import httpx
from hypothesis import strategies as st
from hypothesis.errors import NonInteractiveExampleWarning

from agentstream.contracts import DeadLetter, RunCommandAdapter, StartRun
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import read_until

TOTAL = 1000
MAX_TEXT = 2000
REQUIRED = ("id", "platform", "chat_id", "user", "text")
never_a_string = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def valid(i: int) -> dict:  # type: ignore[type-arg]
    return {"id": f"ok-{i}", "platform": "web", "chat_id": f"c{i % 7}", "user": {"id": f"u{i}"}, "text": f"msg {i}"}


@st.composite
def bad_record(draw, i: int) -> bytes:  # type: ignore[no-untyped-def]
    body = valid(i) | {"id": f"bad-{i}"}
    kind = draw(st.sampled_from(["wrong_type", "missing", "huge", "utf8", "not_json"]))
    if kind == "wrong_type":
        field = draw(st.sampled_from(REQUIRED))
        body[field] = (
            draw(never_a_string)
            if field != "user"
            else draw(st.one_of(never_a_string.filter(lambda v: not isinstance(v, dict)), st.just({"name": "no id"})))
        )
    elif kind == "missing":
        for field in draw(st.sets(st.sampled_from(REQUIRED), min_size=1)):
            del body[field]
    elif kind == "huge":
        body["text"] = draw(st.text(min_size=1, max_size=5)) * (MAX_TEXT + 1)
    elif kind == "utf8":
        raw = json.dumps(body).encode()
        cut = draw(st.integers(min_value=1, max_value=len(raw) - 1))
        return raw[:cut] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"])) + raw[cut:]
    else:
        return draw(
            st.one_of(
                st.binary(max_size=200).filter(lambda b: not b.strip().startswith(b"{")),
                st.text(max_size=100).map(lambda s: ("not json " + s).encode()),
            )
        )
    return json.dumps(body).encode()


def corpus() -> tuple[list[bytes], set[str], int]:
    rng = random.Random(5)
    records, valid_ids, bad = [], set(), 0
    with warnings.catch_warnings():  # drawing examples outside @given is deliberate: one corpus, one service
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        for i in range(TOTAL):
            if rng.random() < 0.5:
                records.append(json.dumps(valid(i)).encode())
                valid_ids.add(f"ok-{i}")
            else:
                records.append(bad_record(i).example())
                bad += 1
    return records, valid_ids, bad


async def test_thousand_mixed_records(settings_factory, topics_created):
    settings = settings_factory(ingress={"max_text_chars": MAX_TEXT}, authz={"rate_limit": {"enabled": False}})
    svc = bootstrap_ingress(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    records, valid_ids, bad = corpus()
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    async with host, httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url("ingress")) as client:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for n, raw in enumerate(records):
                await producer.send(t.inbound, raw, key=f"k{n % 5}".encode())
                if n % 250 == 0:  # alive throughout
                    assert (await client.get("/readyz")).status_code == 200
            await producer.flush()
        finally:
            await producer.stop()
        dlq = await read_until(bootstrap, t.dlq, lambda rs: len(rs) >= bad, timeout=90)
        runs = await read_until(bootstrap, t.runs, lambda rs: len(rs) >= len(valid_ids), timeout=90)
        assert (await client.get("/readyz")).status_code == 200

    letters = [DeadLetter.model_validate_json(r.value) for r in dlq]
    assert len(letters) == bad and all(lt.error and lt.source_offset is not None for lt in letters)
    starts = [RunCommandAdapter.validate_json(r.value) for r in runs]
    assert all(isinstance(s, StartRun) for s in starts)
    ids = [s.inbound_id for s in starts]
    assert len(ids) == len(set(ids)) and set(ids) == valid_ids  # every valid one answered exactly once
