"""Write conversation_4afa954.jsonl: a varied conversation, written by whatever functai is on
PYTHONPATH (tool runs, a wait answered and resumed, a turn left waiting, an entry, a branch, a
failure). Made with the functai of commit 4afa954:

    PYTHONPATH=<checkout of 4afa954>:<its functai_builtin_plugins/approval> FUNCTAI_LOAD_PLUGINS= \
        python tests/data/make_conversation_4afa954.py <folder>   # writes <folder>/old.jsonl

tests/test_opening_rows.py opens it both ways and compares everything.
"""
import sys, shutil
import functai
from functai import ai, tool
from functai.testing import ScriptedLM, tool_call
import functai_approval

@tool(effects="changes")
def book(slot: str) -> str:
    """Book a slot."""
    return f"booked {slot}"

@ai(tools=[book])
def desk(request: str) -> str:
    """Book what is asked."""

def reply(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return "done: " + last["content"]
    if "fail" in last["content"]:
        raise RuntimeError("the model broke")
    if "plain" in last["content"]:
        return "plain answer"
    return tool_call("book", {"slot": last["content"][-2:]})

folder = sys.argv[1]
shutil.rmtree(folder, ignore_errors=True)
from functai.pytest_plugin import InstalledPluginsFactory
InstalledPluginsFactory()(functai_approval.plugin)
store = functai.FolderStore(folder)
with functai.settings(client=ScriptedLM(reply=reply)):
    chat = desk.conversation("old", store=store)
    chat("book a1")
    chat("plain one")
    chat.remember("notes", "seen", {"n": 1}, chat.head)
    with functai.settings(approve="all"):
        try:
            chat("book b2")
        except functai.Waiting as waiting:
            waiting.turn.approve(by="ana")
            waiting.turn.resume()
        try:
            chat("book w9")   # left waiting
        except functai.Waiting as waiting:
            pass
    branch = chat.continue_from(chat.turns[0])
    branch("plain two")
    try:
        branch("please fail")
    except Exception:
        pass
    branch("plain three")
print(functai.__file__)
