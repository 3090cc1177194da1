"""max_depth and max_requests when a tool runs its nested AI calls on other threads.

The models here always ask for the fan-out tool; past `CAP` requests they answer
plainly, so a regression ends in a failed assertion rather than a runaway.
"""

import asyncio
import concurrent.futures
import contextvars
import threading

import pytest

import functai
from functai import FunctAIError, ai, tool
from functai.testing import ScriptedLM, tool_call

CAP = 200


def fan_model(name="fan"):
    lm = ScriptedLM(reply=lambda request: "done" if len(lm.requests) > CAP else tool_call(name, {"task": "t"}))
    return lm


def first_error(outcomes):
    """Raise the first error among the nested calls' outcomes, once every one has ended."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return ",".join(outcomes)


def finishes(call):
    """Run ``call`` on a thread in a copy of this context; fail (instead of hanging) if it never ends."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    worker = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "the call never ended (a deadlock)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# A tool that fans each nested call out over one pool shared by every level: 64 workers.

WIDTH = 64
POOL = None


@pytest.fixture
def shared_pool():
    global POOL
    POOL = concurrent.futures.ThreadPoolExecutor(WIDTH)
    yield POOL
    POOL.shutdown(wait=False, cancel_futures=True)


@tool(effects="reads")
def fan(task: str) -> str:
    """Ask the agent again, many times at once, in copies of the context."""
    futures = [POOL.submit(contextvars.copy_context().run, pooled, task) for _ in range(WIDTH)]
    concurrent.futures.wait(futures)
    return first_error([f.exception() or f.result() for f in futures])


@ai(tools=[fan])
def pooled(task: str) -> str:
    """Do the task."""


def test_a_fan_out_over_a_shared_64_worker_pool_with_copied_contexts_stops_at_exactly_max_requests(
    tmp_path, shared_pool
):
    lm = fan_model()
    functai.configure(client=lm, max_depth=8, max_requests=20, log_calls=str(tmp_path))
    with pytest.raises(FunctAIError) as info:
        finishes(lambda: pooled("t"))
    assert info.value.code == "max-requests" and "max_requests=20" in info.value.message
    assert len(lm.requests) == 20
    logged = list(functai.read_calls(tmp_path))
    assert [r.path for r in logged if r.parent is None] == ["pooled"]  # every other call nested in it
    assert sum(r.attempts for r in logged) == 20


@tool(effects="reads")
def fan_plain(task: str) -> str:
    """Ask the agent again over the shared pool, without copying the context."""
    futures = [POOL.submit(pooled_plain, task) for _ in range(WIDTH)]
    concurrent.futures.wait(futures)
    return first_error([f.exception() or f.result() for f in futures])


@ai(tools=[fan_plain])
def pooled_plain(task: str) -> str:
    """Do the task."""


def test_a_fan_out_over_the_shared_pool_without_the_context_is_refused_instead_of_deadlocking(tmp_path, shared_pool):
    lm = fan_model("fan_plain")
    functai.configure(client=lm, max_depth=8, max_requests=20, log_calls=str(tmp_path))
    with pytest.raises(FunctAIError) as info:
        finishes(lambda: pooled_plain("t"))
    assert info.value.code == "thread-context"
    assert "contextvars.copy_context().run" in info.value.message
    assert len(lm.requests) == 1  # the outermost call's one request; every call on the pool refused
    logged = list(functai.read_calls(tmp_path))
    refused = [r for r in logged if r.parent is None and r.path == "pooled_plain" and r.attempts == 0]
    assert len(refused) == WIDTH and {r.error["code"] for r in refused} == {"thread-context"}


# Depth: one nested call per level, each on a new thread started in a copy of the context.


@tool(effects="reads")
def deeper(task: str) -> str:
    """Ask the agent again on another thread."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(contextvars.copy_context().run, chain, task).result()


@ai(tools=[deeper])
def chain(task: str) -> str:
    """Do the task."""


def test_depth_across_threads_stops_at_max_depth():
    lm = fan_model("deeper")
    with functai.settings(client=lm, max_depth=5, max_requests=100):
        with pytest.raises(FunctAIError) as info:
            chain("t")
    assert info.value.code == "max-depth" and "max_depth=5" in info.value.message
    assert len(lm.requests) == 5
    assert info.value.record.path == "/".join(["chain"] * 6)


# asyncio.to_thread copies the context: nested calls made through it are counted.


@tool(effects="reads")
async def fan_async(task: str) -> str:
    """Ask the agent again, four times at once, in worker threads."""
    outcomes = await asyncio.gather(*(asyncio.to_thread(threaded, task) for _ in range(4)), return_exceptions=True)
    return first_error(outcomes)


@ai(tools=[fan_async])
def threaded(task: str) -> str:
    """Do the task."""


def test_asyncio_to_thread_carries_the_budget_and_the_depth():
    lm = fan_model("fan_async")
    with functai.settings(client=lm, max_depth=8, max_requests=20):
        with pytest.raises(FunctAIError) as info:
            asyncio.run(threaded.acall("t"))
    assert info.value.code == "max-requests" and len(lm.requests) == 20
    lm = fan_model("fan_async")
    with functai.settings(client=lm, max_depth=3, max_requests=1000):
        with pytest.raises(FunctAIError) as info:
            asyncio.run(threaded.acall("t"))
    assert info.value.code == "max-depth" and len(lm.requests) == 1 + 4 + 16


# A thread started without the context: refused while a tool runs, an outermost call otherwise.


@tool(effects="reads")
def fan_threads(task: str) -> str:
    """Ask the agent again on two plain threads."""
    outcomes = []

    def one():
        try:
            outcomes.append(bare(task))
        except FunctAIError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return first_error(outcomes)


@ai(tools=[fan_threads])
def bare(task: str) -> str:
    """Do the task."""


def test_a_nested_call_on_a_plain_thread_is_refused_rather_than_given_a_budget_of_its_own(tmp_path):
    lm = fan_model("fan_threads")
    functai.configure(client=lm, max_depth=8, max_requests=20, log_calls=str(tmp_path))  # plain threads see it
    with pytest.raises(FunctAIError) as info:
        bare("t")
    assert info.value.code == "thread-context"
    assert len(lm.requests) == 1
    logged = list(functai.read_calls(tmp_path))
    asked = [r for r in logged if r.attempts]
    assert len(asked) == 1 and asked[0].tool_calls[0]["error"].startswith("thread-context: ")
    refused = [r for r in logged if not r.attempts]
    assert len(refused) == 2 and all(r.parent is None and r.error["code"] == "thread-context" for r in refused)


@ai
def plain(q: str) -> str:
    """Answer."""


def test_a_plain_thread_with_no_tool_running_makes_an_outermost_call():
    functai.configure(client=ScriptedLM(reply=lambda request: "fine"))
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(plain("q")))
    worker.start()
    worker.join()
    assert outcome == ["fine"]


def test_a_call_belonging_to_no_running_call_runs_in_a_copy_made_on_the_main_thread():
    main_context = contextvars.copy_context()  # on the main thread, outside any call
    seen = {}

    @tool(effects="reads")
    def side(q: str) -> str:
        """While this tool runs, make calls from threads that are not nested in it."""

        def bare_thread():
            try:
                seen["plain thread"] = plain("q")
            except FunctAIError as error:
                seen["plain thread"] = error.code

        def copied():
            seen["main copy"] = plain("q")

        threads = [threading.Thread(target=bare_thread), threading.Thread(target=main_context.run, args=(copied,))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return "ok"

    @ai(tools=[side])
    def host(q: str) -> str:
        """Host."""

    def reply(request):
        if request.messages[0]["content"].startswith("Host") and request.messages[-1]["role"] != "tool":
            return tool_call("side", {"q": "x"})
        return "fine"

    functai.configure(client=ScriptedLM(reply=reply))
    assert host("q") == "fine"
    assert seen["plain thread"] == "thread-context"
    assert seen["main copy"] == "fine"


@tool(effects="reads")
async def fan_executor(task: str) -> str:
    """Ask the agent again in the loop's executor, which does not copy the context."""
    return await asyncio.get_running_loop().run_in_executor(None, executed, task)


@ai(tools=[fan_executor])
def executed(task: str) -> str:
    """Do the task."""


def test_loop_run_in_executor_does_not_carry_the_context_and_is_refused_while_the_tool_runs():
    lm = fan_model("fan_executor")
    functai.configure(client=lm, max_depth=8, max_requests=20)
    with pytest.raises(FunctAIError) as info:
        asyncio.run(executed.acall("t"))
    assert info.value.code == "thread-context" and len(lm.requests) == 1
