"""Text that is not valid Unicode (an escaped lone surrogate, which Python's json accepts) is the
sender's fault: a running ingress answers 400 with where it is, never 503 "kafka unavailable", and
such a record produced straight to `inbound` goes to `dlq` with the reason while ingress reads on."""

from __future__ import annotations

import httpx
import pytest

from agentstream.contracts import DeadLetter, InboundMessage, RunCommandAdapter, StartRun
from agentstream.contracts.unicode import unencodable
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import produce_raw, read_until

# Raw JSON bodies: a client library would refuse to encode the surrogate itself.
LONE_SURROGATE = b'{"id": "bad-1", "platform": "web", "chat_id": "c1", "user": {"id": "u1"}, "text": "\\ud800"}'
IN_METADATA = b'{"id": "bad-2", "platform": "web", "chat_id": "c1", "user": {"id": "u1"}, "text": "hi", "metadata": {"k": ["\\udfff"]}}'
VALID = b'{"id": "ok-1", "platform": "web", "chat_id": "c1", "user": {"id": "u1"}, "text": "hello"}'
# Half of an emoji's surrogate pair, as a client that cuts UTF-16 text would send it.
TELEGRAM_UPDATE = (
    b'{"update_id": 1, "message": {"message_id": 1, "from": {"id": 42, "is_bot": false},'
    b' "chat": {"id": 42, "type": "private"}, "text": "hi \\ud83d"}}'
)
TG_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
JSON_HEADERS = {**ADMIN_HEADERS, "content-type": "application/json"}


async def test_the_http_api_answers_400_with_the_reason(settings_factory, topics_created, monkeypatch):
    monkeypatch.setenv("T_TG_SECRET", "tg-secret")
    settings = settings_factory(
        authz={"rate_limit": {"enabled": False}},
        ingress={"webhooks": {"telegram": {"main": {"secret_env": "T_TG_SECRET"}}}},
    )
    svc = bootstrap_ingress(settings)
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    async with host, httpx.AsyncClient(base_url=host.url("ingress"), headers=JSON_HEADERS, timeout=10) as client:
        text = await client.post("/v1/messages", content=LONE_SURROGATE)
        metadata = await client.post("/v1/messages", content=IN_METADATA)
        webhook = await client.post(
            "/webhooks/telegram/main", content=TELEGRAM_UPDATE, headers={TG_SECRET_HEADER: "tg-secret"}
        )
        fine = await client.post("/v1/messages", content=VALID)
    assert text.status_code == 400, text.text
    assert text.json()["detail"] == (
        "text that is not valid Unicode: text: a lone surrogate (U+D800) at character 0 is not valid Unicode"
    )
    assert metadata.status_code == 400 and "metadata.k.0: a lone surrogate (U+DFFF)" in metadata.json()["detail"]
    assert webhook.status_code == 400 and "message.text: a lone surrogate (U+D83D)" in webhook.json()["detail"]
    assert fine.status_code == 202  # the refusals were no outage


async def test_such_a_record_on_inbound_goes_to_dlq_with_the_reason(settings_factory, topics_created):
    settings = settings_factory(authz={"rate_limit": {"enabled": False}})
    svc = bootstrap_ingress(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    async with host:
        await produce_raw(bootstrap, t.inbound, LONE_SURROGATE, key=b"web:c1")
        await produce_raw(
            bootstrap,
            t.inbound,
            "\ud800".join(VALID.decode().split("hello")).encode("utf-8", "surrogatepass"),
            key=b"web:c1",
        )
        await produce_raw(bootstrap, t.inbound, VALID, key=b"web:c1")
        dlq = await read_until(bootstrap, t.dlq, lambda rs: len(rs) >= 2, timeout=60)
        runs = await read_until(bootstrap, t.runs, lambda rs: len(rs) >= 1, timeout=60)
    letters = [DeadLetter.model_validate_json(r.value or b"") for r in dlq]
    assert [lt.source_offset for lt in letters] == [0, 1]
    # Named as bad JSON, with where: the consumer's parser refuses the surrogate itself.
    assert all(lt.error.startswith("not valid JSON: ") and "at line 1 column" in lt.error for lt in letters)
    [start] = [RunCommandAdapter.validate_json(r.value or b"") for r in runs]
    assert isinstance(start, StartRun) and start.inbound_id == "ok-1"  # ingress read on


def test_the_record_model_refuses_it_wherever_it_is():
    base = {"id": "1", "platform": "web", "chat_id": "c", "user": {"id": "u"}, "text": "x"}
    for bad, where in [
        ({"text": "a\ud800"}, "text: a lone surrogate (U+D800) at character 1"),
        ({"user": {"id": "u", "name": "\udc00"}}, "user.name: a lone surrogate (U+DC00) at character 0"),
        ({"metadata": {"k\udfff": 1}}, "metadata.'k\\udfff': a lone surrogate (U+DFFF) at character 1"),
    ]:
        with pytest.raises(ValueError, match="not valid Unicode") as refused:
            InboundMessage.model_validate({**base, **bad})
        assert where in str(refused.value)
    assert unencodable(InboundMessage.model_validate({**base, "text": "emoji 👍🏽 and ü"})) is None
