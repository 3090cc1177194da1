"""The hook table, declared with pluggy: one function per hook, in the order they fire.

The single source of hook and argument names; `docs/hooks.md` is generated
from these docstrings (``python docs/hook_reference.py``).
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("functai")

#: pluggy's ordering options, which functai does not take: order comes from layers.
ORDERING_OPTIONS = ("tryfirst", "trylast", "hookwrapper", "wrapper")


def ordering_refused(options: list[str], plugin: str | None = None, hook: str | None = None) -> Exception:
    """The ``plugin-hook`` error for a hookimpl that asks pluggy for an order."""
    from .._errors import PluginError

    asked = ", ".join(f"{option}=True" for option in options)
    where = f"plugin {plugin!r}: " if plugin else ""
    what = f"the {hook} handler asks for {asked}" if hook else f"functai.hookimpl({asked}) is refused"
    return PluginError(
        f"{where}{what}, but functai runs plain handlers in its own order, which comes from layers: "
        "the function's own plugins, then each enclosing block (innermost first), then the process, then "
        "installed plugins; within a layer, in the order it lists them. Drop the option and put the plugin "
        "in the layer (and list position) where it should run",
        code="plugin-hook",
        plugin=plugin,
        hook=hook,
    )


class HookimplMarker(pluggy.HookimplMarker):  # type: ignore[misc]  # pluggy marks it final; this only narrows it
    """pluggy's hookimpl marker refusing the ordering options at once: silently ignoring
    ``tryfirst=True`` would run a handler where its author did not expect."""

    def __call__(self, function: Any = None, hookwrapper: bool = False, optionalhook: bool = False,
                 tryfirst: bool = False, trylast: bool = False, specname: str | None = None,
                 wrapper: bool = False) -> Any:
        asked = [name for name, on in zip(ORDERING_OPTIONS, (tryfirst, trylast, hookwrapper, wrapper)) if on]
        if asked:
            raise ordering_refused(asked, hook=getattr(function, "__name__", None))
        return super().__call__(function, optionalhook=optionalhook, specname=specname)


hookimpl = HookimplMarker("functai")


@hookspec
def turn_start(turn):  # type: ignore[no-untyped-def]
    """A conversation turn is about to be sent, before it is recorded.

    Event: ``inputs`` (dict by name), ``conversation`` (id), ``parent`` (the
    turn it would continue, or None), ``program`` (the AI function).

    Change: ``inputs`` — replaces inputs by name; each name must be an input of
    the function.
    """


@hookspec
def context(context):  # type: ignore[no-untyped-def]
    """The earlier turns a turn will be shown have been picked by the
    conversation's rule.

    Event: ``turns`` (the picked turns, oldest first; each with ``id``,
    ``inputs``, ``outputs``, ``without``), ``sections`` (so far),
    ``conversation``, ``parent``, ``program``.

    Change: ``keep`` (ids of done turns of the branch to show), ``without``
    (field names left out of earlier turns), ``sections`` (appended to the
    instruction).
    """


@hookspec
def before_call(call):  # type: ignore[no-untyped-def]
    """Any AI function call is about to be laid out and asked.

    Event: ``function`` (name), ``program``, ``inputs`` (bound, by name),
    ``instruction`` (as it stands), ``sections`` (so far), ``lm`` (model name
    as it stands), ``settings`` (model settings as they stand), ``tools``
    (names offered as they stand), ``all_tools`` (the function's own tool
    names), ``path`` (e.g. ``support/answer``), ``conversation`` and ``turn``
    (ids, or None outside a conversation).

    Change: ``instruction``, ``sections``, ``lm``, ``settings``, ``tools``.
    """


@hookspec
def request(request):  # type: ignore[no-untyped-def]
    """A request is about to be sent to the model client (every attempt: the
    first send, re-asks, each tool step, a retry after a model error).

    Event: ``request`` (the `functai.Request` about to be sent), ``function``,
    ``path``, ``call`` (the call record's id), ``turn`` (the conversation
    turn's id, or None), ``recorded`` (True when a resumed turn reads this
    request's reply back from its record: nothing is paid for it now),
    ``outer_call`` (the outermost call's id, shared by the calls nested in it);
    ``remember``/``entries`` in a turn; ``ask(question, extend=None,
    decide=None)`` asks a person before the request is sent (the turn
    waits; `functai.Answer`; None when nobody can be asked).

    Return a replacement `functai.Request`, which marks the call's record
    ``replayable: false``; or answer instead of the model with a
    `functai.Reply` (its ``note`` says why): the client is not called, the
    reply is read as the model's, and the first handler that answers ends the
    hook; or ``Change(settings=..., decision=..., note=...)``:
    model settings for this request, and what a policy decided, recorded.
    A `functai.FunctAIError` the handler raises refuses the call before
    anything is sent, with its code, recorded as ``{"refused": code}``.
    Or None.
    """


@hookspec
def model_error(failure):  # type: ignore[no-untyped-def]
    """The model client failed for a request (after the client's own retries),
    before the error ends the call.

    Event: ``request`` (the `functai.Request` that failed), ``error`` (the
    `functai.FunctAIError`, with ``.code``), ``attempt`` (1, 2, … for this
    request), ``lm`` (the model asked), ``function``, ``path``, ``call``.

    Change: ``lm`` (ask this model instead, for this request and the rest of
    the call) or ``retry`` (seconds to wait, 0–300, before asking again); or
    return a `functai.Reply` to answer instead. The first handler that acts
    ends the hook.
    No change: the error stands. Every new attempt counts against
    ``max_requests``.
    """


@hookspec
def chunk(chunk):  # type: ignore[no-untyped-def]
    """A piece of a reply's text arrived, before any of it is shown: in a
    stream, for each piece; in a call that is not streamed, once for the whole
    text (``final`` True). Then, whole and ``final``, each other text the call
    shows or keeps: the reply's reasoning, a refusal's words, the message of an
    error raised while asking (``part``).

    Event: ``text`` (the text held so far, not yet shown, this piece last),
    ``shown`` (the reply's text already shown), ``final`` (True when no more
    text follows: what is held now is shown unless a handler changes it),
    ``part`` (``"text"``, ``"reasoning"``, ``"refusal"`` or ``"error"``),
    ``function``, ``path``, ``call``.

    Change: ``hold=True`` (keep the text back for now; at most the plugin's
    ``chunk_window`` characters, the oldest shown first), ``text`` (show this
    instead of what is held: a redaction, recorded with its offsets). A
    `functai.FunctAIError` the handler raises ends the reply as a refusal
    (``plugin-refused``, its message the reason; the first ends the hook).
    Each handler sees the text as the ones before it left it; the reply's
    recorded text is the text shown.
    """


@hookspec
def reply(reply):  # type: ignore[no-untyped-def]
    """A request was answered (every attempt: the first send, re-asks, each
    tool step), before the reply is read or its tools run.

    Event: ``request`` (the `functai.Request` that was sent), ``reply`` (the
    `functai.Reply`: ``text``, ``tool_calls``, ``usage``, ``finish_reason``,
    and ``id`` / ``model`` — the response's id and the model that answered —
    when the server sent them), ``seconds`` (how long the model client took),
    ``attempt`` (1, 2, … within the call), ``function``, ``path``, ``server``
    (``(host, port)`` of the client's ``base_url``, or None for a client
    without one), ``call``, ``answered`` (the plugin that answered the
    request instead of the model, or None), ``turn``, ``recorded`` (read
    back from a resumed turn's record, paid for when first asked), ``outer_call``,
    ``log_content`` (whether the call's record keeps content: a handler that
    sends what was said elsewhere keeps it back when False);
    ``remember``/``entries`` in a turn.

    Hears, or replaces: a handler may return a `functai.Reply` (its ``note``
    says why), which later handlers see and the call reads instead. A raising
    handler stops the call: a redaction that failed must not let the reply
    through.
    """


@hookspec
def tool_call(tool):  # type: ignore[no-untyped-def]
    """The model asked for a tool, which has not run yet.

    Event: ``name``, ``input`` (as it stands), ``effects`` (``"reads"``,
    ``"changes"`` or None), ``path`` (the call path plus the tool name),
    ``invocation`` (1, 2, … within the asking call), ``id`` (the model's
    tool-call id), ``function``, ``settings``, ``key`` (the tool call's
    idempotency key, as `functai.tool_key` gives it inside the tool); method
    ``ask(question=None, *, decide=None)`` asks a person, once every handler
    has run.

    Change: ``inputs`` (merged into the tool's input). A `functai.FunctAIError`
    the handler raises refuses the tool: it does not run, the model is told
    why, and the first refusal ends the hook.
    """


@hookspec
def tool_error(failure):  # type: ignore[no-untyped-def]
    """A tool raised (not when it was blocked or refused).

    Event: ``name``, ``input`` (what ran), ``error`` (the exception's type
    name and message), ``exception``, ``effects``, ``invocation``,
    ``attempt`` (1, 2, … for this tool call), ``id``, ``path``, ``function``,
    ``key`` (the same for every attempt).

    Change: ``output`` (the text the model is shown instead of the default
    error text) or ``retry=seconds`` (wait that long, 0 for not at all, and run
    the tool again with the same input, as ``model_error``'s ``retry`` asks
    the model again: a tool that does not only read must be
    ``@tool(idempotent=True)``; at most ``max_tool_retries`` times per tool
    call).
    """


@hookspec
def tool_result(result):  # type: ignore[no-untyped-def]
    """A tool ran.

    Event: ``name``, ``input`` (what actually ran), ``output`` (text as it
    stands), ``path``, ``invocation``, ``function``, ``key``.

    Change: ``output`` — the tool's result as the model is shown it.
    """


@hookspec
def call_end(call):  # type: ignore[no-untyped-def]
    """An AI function call ended, done or failed, before its record is written.

    Event: ``record`` (the call's record, read-only, as it will be written:
    without content when ``log_content=False``), ``function``, ``path``,
    ``error`` (the error code, or None when the call is done), ``seconds``,
    ``usage`` (token counts summed over the call's replies), ``server`` (as in
    ``reply``; None when the call failed before choosing a client). A model
    request that failed has no ``reply``: the call ends with its error, and
    ``record.attempts`` counts it.

    Hears only: a raising handler is reported and changes nothing; nothing is
    added to ``changes``. Runs for every call — nested ones, a turn's, a
    delegate's — after the call has left its place in the call tree.
    """


@hookspec
def turn_end(turn):  # type: ignore[no-untyped-def]
    """A turn ended (done, failed or stopped), before its end is recorded.

    Event: ``turn`` (id), ``state``, ``inputs``, ``outputs`` (``{}`` unless
    done), ``conversation``, ``parent``; method ``turns()`` (done turns of the
    branch, this one last when done).

    Hears only: a raising handler is reported and changes nothing.
    """


@hookspec
def turn_wait(wait):  # type: ignore[no-untyped-def]
    """A turn started waiting for a person, its questions recorded: it holds its
    branch, and no process runs it, until they are answered and it is resumed
    (or it is abandoned).

    Event: ``conversation``, ``turn`` (id), ``key`` (the key the turn was sent
    with, or None), ``parent``, ``inputs``, ``questions`` (what the turn waits
    for, each as its wait record keeps it: ``key``, ``kind``, and the tool
    call or the question asked).

    Hears only: a raising handler is reported and changes nothing. Something
    that runs turns on workers learns here that this one holds none; a handler
    can keep entries at the turn (``remember``, ``atomically``), as at its end:
    the process that resumes it may be another.
    """


@hookspec
def turn_answer(answer):  # type: ignore[no-untyped-def]
    """An answer to a waiting turn was recorded: from code (``turn.approve()``,
    ``turn.deny()``), ``functai approve`` / ``deny`` or the console — heard in
    the process that recorded it, by the plugins that process runs.

    Event: ``conversation``, ``turn`` (id), ``key`` (the key the turn was sent
    with, or None), ``keys`` (the questions answered),
    ``allow``, ``by`` (who, as given), ``reason`` (given with a refusal),
    ``pid`` (the recording process).

    Hears only: a raising handler is reported, and the answer stays recorded.
    Something that runs turns on workers wakes the waiting turn here,
    whichever process answered.
    """


#: Hook names in the order they are declared above (the hook-table order).
HOOKS: tuple[str, ...] = tuple(
    name for name, value in list(globals().items()) if callable(value) and hasattr(value, "functai_spec")
)
