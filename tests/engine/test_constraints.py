"""Regex and EBNF constraints in-process (JSON Schema has its own tests in test_grammar.py and
test_engine_server_api.py): the output matches, one constraint per request, clear refusals."""

from __future__ import annotations

import re

import pytest

from engine.base import GenerateRequest, InvalidRequest, SamplingParams, TextDelta

# the regexes SGLang's frontend sends for typed ``gen`` (sglang/lang/ir.py, 0.5.23)
TYPED = {
    "int": r"[-+]?[0-9]+[ \n]*",
    "float": r"[-+]?[0-9]*\.?[0-9]+[ \n]*",
    "bool": r"(True|False)",
    "str": r"\"[\w\d\s]*\"",
}
# what an answer cut by max_new_tokens can look like: a prefix of the pattern's language
CUT = {
    "int": r"[-+]?[0-9]*[ \n]*",
    "float": r"[-+]?[0-9]*\.?[0-9]*[ \n]*",
    "bool": r"(T(r(ue?)?)?|F(a(l(se?)?)?)?)",
    "str": r"\"[\w\d\s]*\"?",
}


def text_of(engine, **kwargs: object) -> str:  # noqa: ANN001
    sampling = SamplingParams(max_new_tokens=kwargs.pop("max_new_tokens", 16), temperature=0.8,
                              seed=kwargs.pop("seed", 3))  # fmt: skip
    request = GenerateRequest(sampling=sampling, **kwargs)
    return "".join(i.text for i in engine.generate(request) if isinstance(i, TextDelta))


def test_a_regex_shapes_the_whole_output(engine) -> None:  # noqa: ANN001
    pattern = r"\d{4}-\d{2}-\d{2}"
    for seed in (1, 2, 3):
        out = text_of(engine, prompt="The treaty was signed on", regex=pattern, seed=seed)
        assert re.fullmatch(pattern, out), out


@pytest.mark.parametrize("dtype", sorted(TYPED))
def test_the_frontends_typed_gen_regexes(engine, dtype: str) -> None:  # noqa: ANN001
    out = text_of(engine, prompt=f"A {dtype} value: ", regex=TYPED[dtype], max_new_tokens=8)
    assert re.fullmatch(TYPED[dtype], out) or re.fullmatch(CUT[dtype], out), out
    assert out


def test_an_ebnf_grammar_shapes_the_whole_output(engine) -> None:  # noqa: ANN001
    grammar = 'root ::= answer " because " reason\nanswer ::= "yes" | "no"\nreason ::= [a-z ]+'
    out = text_of(engine, prompt="Is water wet?", ebnf=grammar, max_new_tokens=24)
    assert re.fullmatch(r"(yes|no) because [a-z ]*", out), out


def test_one_constraint_per_request(engine) -> None:  # noqa: ANN001
    request = GenerateRequest(prompt="x", regex="a+", ebnf='root ::= "a"')
    with pytest.raises(InvalidRequest, match="Only one of json_schema, regex, ebnf"):
        engine.generate(request)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"regex": "(unclosed"}, "regex"), ({"ebnf": "root ::= ("}, "ebnf"),
     ({"ebnf": 'start ::= "a"'}, "ebnf")],
)  # fmt: skip
def test_a_broken_constraint_is_refused_naming_it(engine, kwargs: dict, needle: str) -> None:  # noqa: ANN001
    with pytest.raises(InvalidRequest, match=needle):
        engine.generate(GenerateRequest(prompt="x", **kwargs))
