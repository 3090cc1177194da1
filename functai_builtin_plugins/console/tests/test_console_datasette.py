"""A SQLite call log in datasette: the views ``calls`` and ``ratings`` and the metadata.json that
`functai_console.datasette` writes, read with datasette's own test client (skipped when datasette
is not installed: it is no dependency of functai's)."""

from __future__ import annotations

import asyncio
import json

import console_example
import pytest

import functai
from functai_console.datasette import prepare


def test_datasette_shows_calls_with_facets_for_function_model_and_error_code(tmp_path):
    datasette = pytest.importorskip("datasette.app", reason="datasette is not installed (pip install datasette)")
    url = "sqlite:///" + str(tmp_path / "shop.db")
    made = console_example.build(url, url)
    written = prepare(url)
    assert written == str(tmp_path / "metadata.json")
    functai.rate(made["nested"], good=True, by="ana", log=url)  # the log is written as before, views or not
    assert len(list(functai.read_calls(url))) == 7
    assert [t.state for t in functai.Conversation.open("ticket-42", store=url).all_turns()] == ["waiting"]

    async def read():
        app = datasette.Datasette([str(tmp_path / "shop.db")], metadata=json.loads((tmp_path / "metadata.json")
                                                                                   .read_text()))
        calls = await app.client.get("/shop/calls.json", params={"_shape": "objects", "_extra": "facet_results"})
        ratings = await app.client.get("/shop/ratings.json", params={"_shape": "objects"})
        page = await app.client.get("/shop/calls")
        return calls.json(), ratings.json(), page

    calls, ratings, page = asyncio.run(read())
    facets = {name: {row["value"]: row["count"] for row in facet["results"]}
              for name, facet in calls["facet_results"].items()}
    assert facets == {"function": {"support": 6, "order_status": 1}, "model": {"scripted": 7},
                      "error_code": {"model-refused": 1}}
    nested = next(row for row in calls["rows"] if row["id"] == made["nested"])
    assert (nested["function"], nested["module"], nested["error_code"]) == ("support", "console_shop", None)
    assert json.loads(nested["inputs"]) == {"request": "Where is B2?"}  # JSON text, which datasette shows as JSON
    assert json.loads(nested["changes"])[0]["plugin"] == "brief"
    assert [(r["call"], r["good"], r["by"]) for r in ratings["rows"]] == [(made["nested"], 1, "ana")]
    assert page.status_code == 200 and "Every call: what was asked" in page.text and "sorted by seq descending" in page.text


def test_prepare_refuses_a_file_without_a_call_log(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    sqlite3.connect(path).close()
    with pytest.raises(SystemExit, match="no functai call log"):
        prepare(str(path))


def test_the_helper_says_what_it_does_and_refuses_a_wrong_command_line(capsys):
    from functai_console.datasette import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "readable in datasette" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main([])
    assert done.value.code == 2 and "PATH.db" in capsys.readouterr().err
