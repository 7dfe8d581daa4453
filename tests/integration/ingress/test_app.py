"""ingress on the real broker: bad records to the dlq, the sender told in the platform's words, the service keeps serving."""

import json

from agentstream.contracts import DeadLetter, Notice, RunCommandAdapter, RunEventAdapter, RunQueued, StartRun
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_testing.kafka import produce_raw, read_until


async def test_bad_records_go_to_dlq_and_next_message_is_queued(settings_factory, topics_created):
    settings = settings_factory(ingress={"texts": {"web": {"invalid_message": "Nicht verarbeitet: {error}"}}})
    svc = bootstrap_ingress(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    async with ServiceHost([svc], "127.0.0.1", {"ingress": free_port()}):
        await produce_raw(bootstrap, t.inbound, b"this is not json", key=b"web:c1")
        missing_chat = {"id": "m-2", "platform": "web", "user": {"id": "u"}, "text": "hi"}
        await produce_raw(bootstrap, t.inbound, json.dumps(missing_chat).encode(), key=b"web:c1")
        bad_user = {"id": "m-3", "platform": "web", "chat_id": "c1", "user": 5, "text": "hi"}
        await produce_raw(bootstrap, t.inbound, json.dumps(bad_user).encode(), key=b"web:c1")
        good = {"id": "m-4", "platform": "web", "chat_id": "c1", "user": {"id": "u"}, "text": "hello"}
        await produce_raw(bootstrap, t.inbound, json.dumps(good).encode(), key=b"web:c1")

        dlq = await read_until(bootstrap, t.dlq, lambda rs: len(rs) >= 3)
        runs = await read_until(bootstrap, t.runs, lambda rs: len(rs) >= 1)
        events = await read_until(bootstrap, t.events, lambda rs: len(rs) >= 2)

    letters = [DeadLetter.model_validate_json(r.value) for r in dlq]
    assert [lt.raw_value for lt in letters][0] == "this is not json"
    assert "not valid JSON" in letters[0].error
    assert "chat_id: Field required" in letters[1].error
    assert "user" in letters[2].error
    assert all(lt.source_topic == t.inbound and lt.service == "ingress" for lt in letters)
    assert [lt.source_offset for lt in letters] == sorted(lt.source_offset for lt in letters)

    starts = [RunCommandAdapter.validate_json(r.value) for r in runs]
    assert len(starts) == 1 and isinstance(starts[0], StartRun) and starts[0].inbound_id == "m-4"
    assert runs[0].key == b"web:c1"

    evs = [RunEventAdapter.validate_json(r.value) for r in events]
    notices = [e for e in evs if isinstance(e, Notice)]
    queued = [e for e in evs if isinstance(e, RunQueued)]
    assert len(notices) == 1 and "user" in notices[0].text and notices[0].reply_target.chat_id == "c1"
    assert notices[0].text.startswith("Nicht verarbeitet: ")  # the platform's own words
    assert len(queued) == 1 and queued[0].run_id == starts[0].run_id
