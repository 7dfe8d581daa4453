"""A unit test that hangs on purpose; not collected by default (no `test_` prefix).

test_unit_timeouts.py runs it in a child pytest to show the unit-test timeout stops it.
"""

import asyncio


async def test_waits_for_an_event_nobody_sets() -> None:
    await asyncio.Event().wait()
