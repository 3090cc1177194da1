"""The function the DBOS evaluation tests ask on workers: each ask is noted (country, time) in
``$FUNCTAI_EVAL_ASKS`` (country, time, worker), one line written whole, so the test counts who was asked twice."""

import os
import time

import functai
from functai.testing import ScriptedLM

CAPITALS = {f"country-{n}": f"city-{n}" for n in range(2000)}


@functai.ai
def capital(country: str) -> str:
    """The capital city of the country."""
    ...


def _reply(request):
    country = request.messages[-1]["content"].removeprefix("country: ")
    asks = os.environ.get("FUNCTAI_EVAL_ASKS")
    if asks:
        fd = os.open(asks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{country} {time.time():.3f} {os.environ.get('DBOS__VMID', '-')}\n".encode())
        finally:
            os.close(fd)
    return CAPITALS.get(country, "unknown")


def model() -> ScriptedLM:
    return ScriptedLM(reply=_reply)


functai.configure(client=model())
