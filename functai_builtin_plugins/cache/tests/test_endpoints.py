"""The cache never answers for another endpoint or tenant: the key covers the provider, the server's
URL, Azure's resource and API version, the API key and the headers sent — as a salted fingerprint,
so no secret reaches the key or the store. Files are private (0600, folders 0700); an entry
stamped in the future is a miss and is replaced.

Real calls go to real HTTP servers on loopback (tests/loopback.py), one per endpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import time
import warnings

import functai
import pytest
from functai import ai
from functai_cache import cache, request_key
from functai_cache.stores import SALT_FILE, FolderCache, SQLiteCache, open_cache_store
from loopback import LoopbackServer, Scripted, chunks, completion

pytestmark = pytest.mark.usefixtures("functai_isolated")

KEY_A, KEY_B = "sk-tenant-a-0123456789abcdef", "sk-tenant-b-0123456789abcdef"
TENANT_A, TENANT_B = "tenant-a-secret-77", "tenant-b-secret-88"


@ai
def capital(country: str) -> str:
    """Name the capital city."""


@pytest.fixture
def servers(request):
    """Two servers, each answering with its own address (streamed for a test whose driver streams)."""
    streamed = getattr(request.node, "callspec", None) is not None and request.node.callspec.params.get(
        "driver") == "stream"
    with LoopbackServer() as one, LoopbackServer() as two:
        for server in (one, two):
            answer = f"answer from {server.url}"
            for _ in range(20):
                server.script(Scripted(events=chunks(answer)) if streamed else Scripted(body=completion(answer)))
        yield one, two


@pytest.fixture(autouse=True)
def _no_provider_variables(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "VLLM_BASE_URL",
                 "VLLM_API_KEY", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)


_plugins: dict[str, functai.Plugin] = {}


def ask(store: str, driver: str = "sync", **settings) -> str:
    """Ask through the cache of ``store`` (one plugin per store: ``memory:`` is the plugin's own)."""
    plugin = _plugins.get(store) or _plugins.setdefault(store, cache(store))
    with functai.settings(plugins=[plugin], **settings):
        if driver == "async":
            return asyncio.run(capital.acall("France"))
        if driver == "stream":
            with capital.stream("France") as stream:
                list(stream)
            return stream.value
        return capital("France")


@pytest.fixture(autouse=True)
def _fresh_plugins():
    _plugins.clear()
    yield
    _plugins.clear()


@pytest.mark.parametrize("driver", ["sync", "async", "stream"])
def test_a_reply_from_one_endpoint_or_tenant_is_never_served_for_another(servers, store_name, driver):
    one, two = servers
    base = {"lm": "openai/gpt-4.1-mini", "base_url": one.url, "api_key": KEY_A, "headers": {"X-Tenant": TENANT_A}}
    others = [
        {**base, "base_url": two.url},  # another server
        {**base, "lm": "vllm/gpt-4.1-mini"},  # another provider at the same address
        {**base, "api_key": KEY_B},  # another key
        {**base, "headers": {"X-Tenant": TENANT_B}},  # another tenant
        {**base, "headers": {}},  # no tenant header
    ]
    assert ask(store_name, driver, **base) == f"answer from {one.url}"
    asked = len(one.requests) + len(two.requests)
    assert ask(store_name, driver, **base) == f"answer from {one.url}"  # the same endpoint and tenant: a hit
    assert len(one.requests) + len(two.requests) == asked
    for other in others:
        answer = ask(store_name, driver, **other)
        assert answer == f"answer from {other['base_url']}"
        assert len(one.requests) + len(two.requests) == asked + 1, other  # the model was asked
        asked += 1


def test_a_provider_plugins_clients_for_other_keys_or_servers_are_apart(monkeypatch):
    """A provider plugin's client need not say who it asks (anything with ``complete``): functai names
    it by its provider, base URL, key and headers, as its own clients are named."""
    from functai._models import providers

    monkeypatch.setattr(providers, "_manager", None)  # the provider registered here goes with the test
    monkeypatch.setattr(providers, "_clients", providers._LRU(providers.MAX_CLIENTS, close_evicted=False))
    class Gateway:
        def __init__(self, settings):
            self.settings = settings

        def complete(self, request):
            said = f"{self.settings.get('api_key')} at {self.settings.get('base_url')}"
            return functai.Reply(text=said, finish_reason="stop")

    class Provider:
        @functai.providerimpl
        def functai_client(self, provider, model, settings):
            return Gateway(dict(settings)) if provider == "gateway" else None

    functai.register_provider(Provider(), name="gateway")
    kept = cache("memory:")
    answers = {}
    for key, url, headers in [(KEY_A, "http://a.example/v1", None), (KEY_B, "http://a.example/v1", None),
                              (KEY_A, "http://b.example/v1", None), (KEY_A, "http://a.example/v1", {"X-T": "t"})]:
        with functai.settings(lm="gateway/small", api_key=key, base_url=url, headers=headers, plugins=[kept]):
            value, record = capital.run("France")
        answers[(key, url, str(headers))] = (value, [c["plugin"] for c in record.changes])
    assert [changes for _, changes in answers.values()] == [[], [], [], []]  # each asked its own server
    with functai.settings(lm="gateway/small", api_key=KEY_A, base_url="http://a.example/v1", plugins=[kept]):
        value, record = capital.run("France")
    assert value == f"{KEY_A} at http://a.example/v1" and [c["plugin"] for c in record.changes] == ["cache"]


def test_azure_endpoints_with_the_same_deployment_and_versions_are_apart(servers, tmp_path):
    one, two = servers
    store = str(tmp_path / "cache")
    base = {"lm": "azure/prod", "base_url": one.root + "/openai", "api_key": KEY_A, "api_version": "2024-10-21"}
    ask(store, **base)
    ask(store, **base)
    assert len(one.requests) == 1
    ask(store, **{**base, "base_url": two.root + "/openai"})  # another resource, the same deployment name
    assert len(two.requests) == 1
    ask(store, **{**base, "api_version": "2025-01-01-preview"})
    assert len(one.requests) == 2


def test_no_secret_reaches_the_key_or_the_store(servers, tmp_path):
    one, _ = servers
    folder, db = str(tmp_path / "cache"), str(tmp_path / "cache.db")
    for store in (folder, "sqlite:///" + db):
        ask(store, lm="openai/m", base_url=one.url, api_key=KEY_A, headers={"X-Tenant": TENANT_A})
    kept = b""
    for root, _, files in os.walk(tmp_path):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                kept += handle.read()
    assert len(kept) > 1000
    for secret in (KEY_A, TENANT_A):
        assert secret.encode() not in kept
        assert secret.encode().hex().encode() not in kept


def test_the_fingerprint_is_salted_per_store_and_the_salt_is_kept(servers, tmp_path):
    one, _ = servers
    endpoint = functai.OpenAIClient(base_url=one.url, api_key=KEY_A).endpoint
    assert KEY_A not in repr(endpoint)
    request = functai.Request(model="m", messages=[{"role": "user", "content": "hi"}])
    first, second = FolderCache(str(tmp_path / "a")), FolderCache(str(tmp_path / "b"))
    assert first.salt() != second.salt()
    assert request_key(request, endpoint, first.salt()) != request_key(request, endpoint, second.salt())
    assert FolderCache(str(tmp_path / "a")).salt() == first.salt()  # read back from .salt
    db = "sqlite:///" + str(tmp_path / "c.db")
    assert open_cache_store(db).salt() == open_cache_store(db).salt()


def test_a_damaged_salt_is_logged_and_a_miss_never_a_wrong_hit(servers, tmp_path, caplog):
    one, _ = servers
    store = str(tmp_path / "cache")
    settings = {"lm": "openai/m", "base_url": one.url, "api_key": KEY_A}
    ask(store, **settings)
    with open(os.path.join(store, SALT_FILE), "w") as handle:
        handle.write("not a salt")
    _plugins.clear()  # as another process, which reads the salt afresh
    with caplog.at_level("WARNING", logger="functai.cache"):
        assert ask(store, **settings) == f"answer from {one.url}"
    assert len(one.requests) == 2
    assert "salt" in caplog.text and "damaged" in caplog.text


def _modes(folder: str) -> dict[str, int]:
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, folder)] = stat.S_IMODE(os.stat(path).st_mode)
    return found


def test_cache_files_are_0600_and_folders_0700_whatever_the_umask(servers, tmp_path):
    one, _ = servers
    old = os.umask(0o022)
    try:
        ask(str(tmp_path / "folder" / "cache"), lm="openai/m", base_url=one.url, api_key=KEY_A)
        plugin_store = "sqlite:///" + str(tmp_path / "sql" / "cache.db")
        with functai.settings(plugins=[cache(plugin_store)], lm="openai/m", base_url=one.url, api_key=KEY_A):
            capital("France")
            capital("Spain")
            modes = _modes(str(tmp_path / "sql"))  # while its connection is open: -wal and -shm are there
    finally:
        os.umask(old)
    assert {"cache.db", "cache.db-wal", "cache.db-shm"} <= set(modes)
    assert all(mode == 0o600 for mode in modes.values()), modes
    folder_modes = _modes(str(tmp_path / "folder"))
    assert len(folder_modes) >= 4  # the folder, a shard, an entry, the salt
    for name, mode in folder_modes.items():
        want = 0o700 if os.path.isdir(tmp_path / "folder" / name) else 0o600
        assert mode == want, (name, oct(mode))


def _stamp_future(store: str, at: float) -> int:
    """Every entry in ``store`` stamped ``at``, as a hand edit or a wrong clock would; how many."""
    if store.startswith("sqlite:///"):
        with sqlite3.connect(store[len("sqlite:///"):]) as conn:
            rows = conn.execute("SELECT key, entry FROM functai_cache").fetchall()
            for key, text in rows:
                entry = json.loads(text)
                entry["at"] = at
                conn.execute("UPDATE functai_cache SET at = ?, entry = ? WHERE key = ?", (at, json.dumps(entry), key))
        return len(rows)
    count = 0
    for root, _, files in os.walk(store):
        for name in files:
            if name.endswith(".json"):
                path = os.path.join(root, name)
                with open(path) as handle:
                    entry = json.load(handle)
                entry["at"] = at
                with open(path, "w") as handle:
                    json.dump(entry, handle)
                count += 1
    return count


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
def test_an_entry_stamped_in_the_future_is_a_miss_and_is_replaced(servers, tmp_path, kind):
    one, _ = servers
    store = str(tmp_path / "cache") if kind == "folder" else "sqlite:///" + str(tmp_path / "cache.db")
    settings = {"lm": "openai/m", "base_url": one.url, "api_key": KEY_A}
    ask(store, **settings)
    assert _stamp_future(store, time.time() + 365 * 86400) == 1
    ask(store, **settings)
    assert len(one.requests) == 2  # not answered by the damaged entry
    ask(store, **settings)
    assert len(one.requests) == 2  # the fresh entry replaced it
    if kind == "sqlite":
        stamped = SQLiteCache(store[len("sqlite:///"):])._conn().execute("SELECT at FROM functai_cache").fetchall()
        assert [at for (at,) in stamped][0] <= time.time()
