"""The key: every part of a request as sent, and who it is sent to, is in it; nothing else is.

10,000 requests, each a base request changed in exactly one part (of the
request, or of the endpoint: provider, server, Azure API version, key, a
header sent), never hit
the base's entry nor another request's (two requests share a key only when
their canonical JSON is the same);
the base request rebuilt from fresh objects, keys in another order, always
hits. Driven through `request_key` and a store directly; test_calls.py does
a smaller part through real calls.
"""

from __future__ import annotations

import copy
import json
import random

import pytest
from functai import OpenAIClient, Request
from functai._models.azure import AzureOpenAIClient
from functai_cache import KEY_VERSION, canonical, request_key
from functai_cache.stores import MemoryCache

pytestmark = pytest.mark.usefixtures("functai_isolated")

INSTRUCTION = "Answer the customer's question about their order, politely and briefly."
SECTION = "Store policy: refunds within 30 days; never promise a delivery date."

BASE: dict = {
    "model": "openai/gpt-4.1-mini",
    "messages": [
        {"role": "system", "content": INSTRUCTION + "\n\n" + SECTION},
        {"role": "user", "content": "question: Where is my order 1234? It was due on Monday. ünïcödé ✓ " * 12},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "name": "track", "input": {"order": 1234, "verbose": True}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "track", "content": "In transit, depot B. " * 20},
    ],
    "tools": [
        {"name": "track", "description": "Where an order is.",
         "parameters": {"type": "object", "properties": {"order": {"type": "integer"}, "verbose": {"type": "boolean"}},
                        "required": ["order"]}},
        {"name": "refund", "description": "Refund an order.",
         "parameters": {"type": "object", "properties": {"order": {"type": "integer"}, "reason": {"type": "string"}},
                        "required": ["order", "reason"]}},
    ],
    "settings": {"temperature": 0.2, "max_tokens": 500, "seed": 7, "stop": ["\n\nEND"]},
    "output_schema": {"type": "object", "properties": {"answer": {"type": "string"}, "urgent": {"type": "boolean"}},
                      "required": ["answer", "urgent"]},
    "endpoint": {"provider": "azure", "base_url": "https://contoso.openai.azure.com", "api_key": "sk-0123456789abcdef",
                 "api_version": "2024-10-21", "headers": {"X-Tenant": "tenant-1", "X-Region": "eu"}},
}

SALT = b"s" * 32


def shuffled(value, rng):
    """``value`` rebuilt from fresh dicts and lists, each dict's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def build(parts: dict) -> Request:
    return Request(model=parts["model"], messages=parts["messages"], tools=parts["tools"],
                   settings=parts["settings"], output_schema=parts["output_schema"])


def endpoint_of(parts: dict):
    """The endpoint a real client for ``parts["endpoint"]`` reports."""
    where = dict(parts["endpoint"])
    options = {"name": where["provider"], "base_url": where["base_url"], "api_key": where["api_key"],
               "headers": where["headers"]}
    if where["provider"] == "azure":
        return AzureOpenAIClient(api_version=where["api_version"], **options).endpoint
    return OpenAIClient(**options).endpoint


def key_of(parts: dict) -> str | None:
    return request_key(build(parts), endpoint_of(parts), SALT)


def other_char(c: str, rng: random.Random) -> str:
    while True:
        new = rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;!?\n\"\\'éü✓")
        if new != c:
            return new


def sendable_change(text: str, rng: random.Random) -> str:
    """`change_text`, to what an HTTP header can carry (ASCII, no line break)."""
    while True:
        new = change_text(text, rng)
        if new != text and new.isascii() and not any(c in new for c in "\r\n\0"):
            return new


def change_text(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text))
    how = rng.randrange(3)
    if how == 0:
        return text[:i] + other_char(text[i], rng) + text[i + 1:]
    if how == 1:
        return text[:i] + rng.choice("x ✓\"") + text[i:]
    return text[:i] + text[i + 1:]


def mutate_model(p, rng):
    p["model"] = rng.choice(["openai/gpt-4.1", "openai/gpt-4.1-mini ", "anthropic/claude", change_text(p["model"], rng)])


def mutate_setting(p, rng):
    s = p["settings"]
    how = rng.randrange(5)
    if how == 0:
        s["temperature"] = rng.choice([0.21, 0.0, 1, 2.0, 0.20000001])
    elif how == 1:
        s["max_tokens"] = rng.choice([499, 501, 5000, 1])
    elif how == 2:
        del s[rng.choice(sorted(s))]
    elif how == 3:
        s[rng.choice(["top_p", "user", "tool_choice", "parallel_tool_calls"])] = rng.choice([0.9, "u", "auto", False])
    else:
        s["stop"] = rng.choice([["\n\nEND", "STOP"], "\n\nEND", ["\n\nEnd"], []])


def mutate_tool_schema(p, rng):
    tool = rng.choice(p["tools"])
    schema = tool["parameters"]
    how = rng.randrange(5)
    if how == 0:
        name = rng.choice(sorted(schema["properties"]))
        kind = schema["properties"][name]
        kind["type"] = rng.choice([t for t in ("string", "number", "null") if t != kind["type"]])
    elif how == 1:
        schema["properties"][f"extra{rng.randrange(100)}"] = {"type": "string"}
    elif how == 2:
        schema["required"] = schema["required"][:-1] if len(schema["required"]) > 1 else []
    elif how == 3:
        schema["additionalProperties"] = rng.choice([False, True])
    else:
        tool["description"] = change_text(tool["description"], rng)


def mutate_message_char(p, rng):
    with_text = [m for m in p["messages"] if m.get("content")]
    message = rng.choice(with_text)
    message["content"] = change_text(message["content"], rng)


def mutate_output_format(p, rng):
    how = rng.randrange(4)
    if how == 0:
        p["output_schema"] = None
    elif how == 1:
        p["output_schema"]["properties"]["urgent"]["type"] = rng.choice(["string", "integer"])
    elif how == 2:
        p["output_schema"]["required"] = ["answer"]
    else:
        p["output_schema"]["properties"]["answer"]["maxLength"] = rng.randrange(1, 1000)


def mutate_section(p, rng):
    system = p["messages"][0]
    how = rng.randrange(3)
    if how == 0:
        system["content"] = system["content"] + "\n\n" + rng.choice(["Be brief.", "Answer in French.", SECTION])
    elif how == 1:
        system["content"] = INSTRUCTION  # the plugin's section left out
    else:
        system["content"] = INSTRUCTION + "\n\n" + change_text(SECTION, rng)


def mutate_endpoint(p, rng):
    where = p["endpoint"]
    how = rng.randrange(6)
    if how == 0:
        where["provider"] = rng.choice(["openai", "vllm", "ollama"])  # the same address, another provider
    elif how == 1:
        where["base_url"] = rng.choice(["https://fabrikam.openai.azure.com", "https://contoso.openai.azure.com/x",
                                        "http://contoso.openai.azure.com", change_text(where["base_url"], rng)])
    elif how == 2:
        where["api_version"] = rng.choice(["2025-01-01-preview", "2024-10-01", change_text(where["api_version"], rng)])
    elif how == 3:  # a key and a header hold only what an HTTP header carries (the client refuses the rest)
        where["api_key"] = sendable_change(where["api_key"], rng)
    elif how == 4:
        name = rng.choice(sorted(where["headers"]))
        where["headers"][name] = sendable_change(where["headers"][name], rng)
    else:
        name = rng.choice(["X-Tenant", "X-Region", "X-Extra"])
        if name in where["headers"]:
            del where["headers"][name]
        else:
            where["headers"][name] = "on"


MUTATIONS = [mutate_model, mutate_setting, mutate_tool_schema, mutate_message_char, mutate_output_format,
             mutate_section, mutate_endpoint]


def identity(parts: dict) -> str:
    """Which request ``parts`` is, and where it goes, found without the code under test."""
    parts = copy.deepcopy(parts)
    where = parts["endpoint"]
    if where["provider"] != "azure":
        del where["api_version"]  # only Azure sends one
    where["base_url"] = where["base_url"].rstrip("/")
    return json.dumps(parts, sort_keys=True)


def test_ten_thousand_requests_changed_in_one_part_never_hit_and_unchanged_ones_always_do():
    rng = random.Random(22)
    store = MemoryCache()
    base = identity(BASE)
    base_key = key_of(BASE)
    store.put(base_key, {"key": base_key, "at": 1.0, "reply": {"text": base}}, float("-inf"))
    requests_by_key: dict[str, str] = {base_key: base}
    per_mutation = dict.fromkeys((m.__name__ for m in MUTATIONS), 0)
    false_hits = 0
    for i in range(10_000):
        parts = shuffled(copy.deepcopy(BASE), rng)
        mutation = MUTATIONS[i % len(MUTATIONS)]
        mutation(parts, rng)
        which = identity(parts)
        assert which != base, f"{mutation.__name__} left the request as it was"
        per_mutation[mutation.__name__] += 1
        key = key_of(parts)
        entry = store.get(key)
        if entry is not None and entry["reply"]["text"] != which:  # an answer kept for another request
            false_hits += 1
        assert requests_by_key.setdefault(key, which) == which  # one key, one request
        store.put(key, {"key": key, "at": 1.0, "reply": {"text": which}}, float("-inf"))
    assert false_hits == 0
    assert all(count >= 1400 for count in per_mutation.values()), per_mutation
    assert len(requests_by_key) > 2000  # many distinct requests (the small mutations repeat), each with its own key

    hits = 0
    for _ in range(2_000):
        entry = store.get(key_of(shuffled(copy.deepcopy(BASE), rng)))
        hits += entry is not None and entry["reply"]["text"] == base
    assert hits == 2_000


def test_the_key_is_the_canonical_json_of_the_request_as_sent():
    request = build(BASE)
    text = canonical(request)
    assert text.startswith('{"messages":[{"content":"Answer the customer') and " " not in text[:12]
    assert "ünïcödé ✓" in text  # text as it is, not \\u-escaped
    assert '"output_schema":{"properties"' in text and '"settings":{"max_tokens":500,"seed":7' in text
    import hashlib
    import hmac

    endpoint = endpoint_of(BASE)
    assert endpoint.url == "https://contoso.openai.azure.com/openai/deployments/%7Bmodel%7D/chat/completions?api-version=2024-10-21"
    fingerprint = endpoint.fingerprint(SALT)
    line = json.dumps(["azure", endpoint.url, fingerprint])
    assert request_key(request, endpoint, SALT) == hashlib.sha256(f"{KEY_VERSION}\n{line}\n{text}".encode()).hexdigest()
    assert "sk-0123456789abcdef" not in repr(endpoint) and "tenant-1" not in repr(endpoint)
    # the headers' stand-in is no field: nothing that writes an object out can write it
    from functai._calls.outputs import to_jsonable
    from functai._models.endpoint import sent_headers

    hashed = hashlib.sha256(sent_headers({"Accept": "application/json", "api-key": "sk-0123456789abcdef",
                                          "X-Tenant": "tenant-1", "X-Region": "eu"})).digest()
    assert fingerprint == hmac.new(SALT, hashed, hashlib.sha256).hexdigest()
    written = json.dumps(to_jsonable(endpoint)) + repr(vars(endpoint) if hasattr(endpoint, "__dict__") else None)
    assert hashed.hex() not in written and str(hashed) not in written
    assert endpoint.fingerprint(b"another salt") != fingerprint


def test_a_request_holding_something_that_is_not_json_data_has_no_key():
    parts = copy.deepcopy(BASE)
    parts["settings"]["stop"] = {"a", "b"}  # a set: how it would be sent is not defined
    assert request_key(build(parts)) is None
    parts = copy.deepcopy(BASE)
    parts["settings"]["temperature"] = float("nan")
    assert request_key(build(parts)) is None


def test_nan_in_a_tool_input_is_not_read_as_null():
    """msgspec writes NaN as null; such a request must not share the key of the one holding null."""
    with_null, with_nan = copy.deepcopy(BASE), copy.deepcopy(BASE)
    with_null["messages"][2]["tool_calls"][0]["input"]["order"] = None
    with_nan["messages"][2]["tool_calls"][0]["input"]["order"] = float("nan")
    assert request_key(build(with_null)) is not None
    assert request_key(build(with_nan)) is None
    plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [], "settings": {},
             "output_schema": None}
    assert request_key(build(plain)) is not None
    plain["messages"][0]["weight"] = float("nan")  # a plugin's extra field on a message of text
    assert request_key(build(plain)) is None
    with_inf = copy.deepcopy(BASE)
    with_inf["output_schema"]["properties"]["answer"]["maxLength"] = float("inf")
    assert request_key(build(with_inf)) is None


def test_the_same_request_has_the_same_key_whichever_writer_wrote_its_json():
    parts = copy.deepcopy(BASE)
    parts["settings"]["big"] = 2**70  # more than msgspec writes: json writes it
    parts["messages"][1]["content"] += " null"
    assert request_key(build(parts)) == request_key(build(shuffled(parts, random.Random(1))))
    assert canonical(build(parts)) == json.dumps(
        {k: v for k, v in parts.items() if k != "endpoint"}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
