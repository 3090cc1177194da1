"""Exit statuses a script or CI can trust: `functai evaluate` fails when the model could not be
used (an outage is not a score of 0), and `--min-score` turns a low score into a failure."""

import io
import sys
import textwrap

import pytest
from loopback import LoopbackServer, Scripted, error_body, refused_url

import functai
from functai._cli import main
from functai import Reply
from functai.testing import ScriptedLM

APP = textwrap.dedent('''
    from functai import ai

    @ai
    def capital(country: str) -> str:
        """The capital city of the country."""
''')


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def rated(tmp_path, monkeypatch):
    """A module with an AI function, and a call log with two of its calls rated good."""
    (tmp_path / "capital_app.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("capital_app", None)
    import capital_app

    log = str(tmp_path / "calls")
    functai.configure(client=ScriptedLM(["Lima", "Paris"]), log_calls=log)
    for country in ("Peru", "France"):
        _, record = capital_app.capital.run(country)
        functai.rate(record, good=True)
    functai.configure(client=None, log_calls=None)
    yield log
    sys.modules.pop("capital_app", None)


def evaluate(log, *more):
    return run(["evaluate", "capital_app:capital", "--log", log, "--workers", "1", *more])


@pytest.mark.parametrize("status", [500, 401])
def test_a_model_answering_an_http_error_exits_1_not_a_score_of_zero(rated, status):
    with LoopbackServer(default=Scripted(status=status, body=error_body("nope"))) as server:
        functai.configure(lm="openai/m", base_url=server.url, api_key="sk-evaluate-0123456789", http_retries=0)
        got, out, err = evaluate(rated)
    assert len(server.requests) == 2  # both rows were asked
    assert got == 1, err
    assert out.startswith("score 0.000")  # the rows are still shown
    first = err.splitlines()[0]
    assert first.startswith("functai: error [model-http]: 2 of 2 rows failed because the model could not be used")
    assert f"HTTP {status}" in first and "sk-evaluate-0123456789" not in err + out
    assert err.splitlines()[1].startswith("  hint: check the model")


def test_an_unreachable_model_exits_1(rated):
    url, sock = refused_url()
    with sock:
        functai.configure(lm="openai/m", base_url=url, api_key="k", http_retries=0)
        got, out, err = evaluate(rated)
    assert got == 1 and err.startswith("functai: error [model-unreachable]: 2 of 2 rows failed"), err


def test_an_unknown_provider_exits_1(rated):
    functai.configure(lm="nosuchprovider/m")
    got, _, err = evaluate(rated)
    assert got == 1 and err.startswith("functai: error [model-provider]: 2 of 2 rows failed"), err


def test_a_genuine_low_score_exits_0_unless_min_score_is_given(rated):
    functai.configure(client=ScriptedLM(["Quito", "Quito"]))  # wrong, but the model answered
    got, out, err = evaluate(rated)
    assert (got, err) == (0, "") and out.startswith("score 0.000")
    functai.configure(client=ScriptedLM(["Quito", "Quito"]))
    got, out, err = evaluate(rated, "--min-score", "0.5")
    assert got == 1 and out.startswith("score 0.000")
    assert err == "functai: error [min-score]: the score 0.000 is below --min-score 0.5\n"


def test_a_score_at_the_minimum_passes(rated):
    functai.configure(client=ScriptedLM(["Lima", "Quito"]))
    got, out, err = evaluate(rated, "--min-score", "0.5")
    assert (got, err) == (0, "") and out.startswith("score 0.500")


def test_the_library_names_the_rows_the_model_could_not_answer(rated):
    import capital_app

    with LoopbackServer(default=Scripted(status=401, body=error_body("bad key"))) as server:
        functai.configure(lm="openai/m", base_url=server.url, api_key="k", http_retries=0)
        result = functai.evaluate(capital_app.capital, log=rated, workers=1)
    assert [row.code for row in result.model_failures] == ["model-http", "model-http"]
    functai.configure(client=ScriptedLM(["Lima", "Quito"]))
    result = functai.evaluate(capital_app.capital, log=rated, workers=1)
    assert result.model_failures == [] and result.score == 0.5


def test_a_base_url_carrying_credentials_exits_1(rated, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:hunter2@127.0.0.1:9/v1")
    functai.configure(lm="openai/m", api_key="k", http_retries=0)
    got, out, err = evaluate(rated)
    assert got == 1 and err.startswith("functai: error [base-url-credentials]: 2 of 2 rows failed"), err
    assert "hunter2" not in out + err


def test_the_model_is_unusable_by_the_errors_type_not_a_list_of_codes(rated):
    new_code = functai.ModelError("the server is overloaded", code="model-overloaded")
    refused = Reply(refusal="I cannot say", finish_reason="stop")
    functai.configure(client=ScriptedLM([new_code, refused]))
    got, out, err = evaluate(rated)
    assert got == 1 and err.startswith("functai: error [model-overloaded]: 1 of 2 rows failed"), err
    assert "model-refused" in out  # the refusal is a row the model answered: scored 0, not an outage
    functai.configure(client=ScriptedLM([refused, refused]))
    got, out, err = evaluate(rated)
    assert (got, err) == (0, "") and out.startswith("score 0.000")
