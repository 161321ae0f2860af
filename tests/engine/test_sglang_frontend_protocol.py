"""SGLang's frontend language (``sgl.gen``, ``sgl.select``, ``fork``, ``run_batch``, streaming)
against ``engine-server``: the HTTP calls exactly as ``RuntimeEndpoint`` makes them.

Protocol checked: sglang 0.5.23 (``sglang/lang/backend/runtime_endpoint.py``,
``sglang/lang/choices.py``, ``sglang/lang/ir.py``), the bodies captured from that frontend
against a logging server. The three ``select`` methods are computed here as the frontend does
from the answers, and their choices must equal those of scoring the same strings in-process.
The same program was run by hand with the sglang 0.5.23 package's own frontend against
``appliance engine-server`` (README, "SGLang compatibility").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from engine.base import GenerateRequest, LogprobDelta, LogprobOptions, SamplingParams

# what every frontend ``gen`` sends besides its own settings (0.5.23, defaults of ``.run()``)
GEN_DEFAULTS = {
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "min_new_tokens": 0,
    "n": 1,
    "stop_token_ids": [],
    "stop_regex": [],
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "ignore_eos": False,
    "regex": None,
    "json_schema": None,
}
INT_REGEX = r"[-+]?[0-9]+[ \n]*"  # ``sgl.gen(dtype=int)``

Entries = list[list]  # [logprob, token_id, text] triples


def post(http: httpx.Client, body: dict) -> dict | list:
    r = http.post("/generate", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def gen(http: httpx.Client, text: str, **settings: object) -> dict:
    params = {**GEN_DEFAULTS, "max_new_tokens": 16, "stop": [], "temperature": 0, **settings}
    out = post(http, {"text": text, "sampling_params": params})
    assert isinstance(out, dict) and "text" in out and "meta_info" in out
    return out


# ---- select, as RuntimeEndpoint.select and sglang.lang.choices compute it ------------------


def normalized(entries: Entries) -> float:
    values = [e[0] for e in entries if e[0]]  # the frontend skips None (and 0.0)
    return sum(values) / len(values)


def token_length_normalized(conditional: list[Entries], _: list[Entries] | None) -> int:
    scores = [normalized(e) for e in conditional]
    return scores.index(max(scores))


def greedy_token_selection(conditional: list[Entries], _: list[Entries] | None) -> int:
    width = max(len(e) for e in conditional)
    rows = []
    for entries in conditional:
        values = [e[0] for e in entries]
        mean = sum(values) / len(values)  # a None here would fail, as in the frontend
        rows.append(values + [mean] * (width - len(values)))
    remaining = list(range(len(rows)))
    for column in range(width):
        best = max(rows[i][column] for i in remaining)
        remaining = [i for i in remaining if rows[i][column] == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def unconditional_likelihood_normalized(
    conditional: list[Entries], unconditional: list[Entries] | None
) -> int:
    assert unconditional is not None
    scores = []
    for cond, uncond in zip(conditional, unconditional, strict=True):
        assert len(cond) == len(uncond)
        base = [uncond[0][0] or 0.0] + [e[0] for e in uncond[1:]]
        scores.append(sum(c[0] - u for c, u in zip(cond, base, strict=True)) / len(cond))
    return scores.index(max(scores))


METHODS: dict[str, Callable[[list[Entries], list[Entries] | None], int]] = {
    "token_length_normalized": token_length_normalized,
    "greedy_token_selection": greedy_token_selection,
    "unconditional_likelihood_normalized": unconditional_likelihood_normalized,
}


def heal(prefix: str, conditional: list[Entries]) -> list[Entries]:
    """The frontend drops the first entry unless the prefix's text ends with its token."""
    return [e[1:] if prefix.endswith(e[0][2]) else e for e in conditional]


def select_over_http(http: httpx.Client, prefix: str, choices: list[str], method: str) -> int:
    cached = post(http, {"text": prefix, "sampling_params": {"max_new_tokens": 0}})
    start = max(cached["meta_info"]["prompt_tokens"] - 2, 0)
    answers = post(
        http,
        {
            "text": [prefix + c for c in choices],
            "sampling_params": {"max_new_tokens": 0, "temperature": 0},
            "return_logprob": True,
            "return_text_in_logprobs": True,
            "logprob_start_len": start,
        },
    )
    assert isinstance(answers, list) and len(answers) == len(choices)
    for answer in answers:
        assert answer["meta_info"]["output_token_logprobs"] == []
        # the prefix was prefilled once: each choice reuses it up to the scored positions
        assert answer["meta_info"]["cached_tokens"] >= start - 1
    conditional = heal(prefix, [a["meta_info"]["input_token_logprobs"] for a in answers])
    unconditional = None
    if method == "unconditional_likelihood_normalized":
        ids = [[e[1] for e in entries] for entries in conditional]
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 0}, "return_logprob": True}
        unconditional = [a["meta_info"]["input_token_logprobs"] for a in post(http, body)]
    return METHODS[method](conditional, unconditional)


def select_in_process(engine, prefix: str, choices: list[str], method: str) -> int:  # noqa: ANN001
    """The same strings scored by the engine itself, no HTTP in between."""

    def score(request: GenerateRequest) -> Entries:
        items = [i for i in engine.generate(request) if isinstance(i, LogprobDelta) and i.prompt]
        tokens = items[0].tokens
        texts = engine.token_texts([t.token_id for t in tokens])
        return [[t.logprob, t.token_id, text] for t, text in zip(tokens, texts, strict=True)]

    start = max(engine.count_tokens(prefix) - 2, 0)
    one = SamplingParams(max_new_tokens=1, temperature=0.0)
    conditional = heal(
        prefix,
        [
            score(GenerateRequest(prompt=prefix + c, sampling=one, logprobs=LogprobOptions(start)))
            for c in choices
        ],
    )
    unconditional = None
    if method == "unconditional_likelihood_normalized":
        unconditional = [
            score(
                GenerateRequest(
                    input_ids=tuple(e[1] for e in entries),
                    sampling=one,
                    logprobs=LogprobOptions(0),
                )
            )
            for entries in conditional
        ]
    return METHODS[method](conditional, unconditional)


SELECTS = [
    ("Is the sky blue? Answer:", [" yes", " no", " maybe not"]),
    ("The capital of France is", [" Paris", " London", " Berlin", " a city in Spain"]),
    ("2 + 2 =", [" 4", " 5", " 22"]),
]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_select_chooses_as_scoring_in_process(http: httpx.Client, engine, method: str) -> None:  # noqa: ANN001
    for prefix, choices in SELECTS:
        over_http = select_over_http(http, prefix, choices, method)
        assert over_http == select_in_process(engine, prefix, choices, method), (prefix, method)


# ---- the rest of the frontend's calls --------------------------------------------------------


def test_constructor_info_and_flush(http: httpx.Client) -> None:
    assert http.get("/get_model_info").json()["model_path"]
    assert "context_length" in http.get("/server_info").json()
    assert http.post("/flush_cache").status_code == 200  # the frontend sends no body


def test_gen_with_a_string_stop_and_logprobs(http: httpx.Client) -> None:
    out = gen(http, "Q: What is 1+1?\nA:", stop="\n")
    assert "\n" not in out["text"]
    params = {**GEN_DEFAULTS, "max_new_tokens": 4, "stop": [], "temperature": 1.0}
    body = {
        "text": "The capital of France is",
        "sampling_params": params,
        "return_logprob": True,
        "logprob_start_len": 0,
        "top_logprobs_num": 2,
        "return_text_in_logprobs": True,
    }
    meta = post(http, body)["meta_info"]
    assert meta["input_token_logprobs"][0][0] is None
    assert len(meta["output_token_logprobs"]) == meta["completion_tokens"]


def test_regex_and_typed_gen(http: httpx.Client) -> None:
    out = gen(http, "Date: ", max_new_tokens=12, regex=r"\d{4}-\d{2}-\d{2}")
    assert __import__("re").fullmatch(r"\d{4}-\d{2}-\d{2}", out["text"]), out["text"]
    # gen(dtype=int): the int regex, and " " and "\n" as stops
    out = gen(http, "An integer: ", max_new_tokens=8, regex=INT_REGEX, stop=[" ", "\n"])
    assert out["text"].lstrip("+-").isdigit(), out["text"]


def test_fork_caches_the_prefix_then_generates_each_branch(http: httpx.Client, engine) -> None:  # noqa: ANN001
    prefix = "List two tips for staying healthy, each on its own line, with a reason.\n" * 3
    post(http, {"text": prefix, "sampling_params": {"max_new_tokens": 0}})
    shared = engine.count_tokens(prefix)
    for branch in ("Tip 1:", "Tip 2:"):
        out = gen(http, prefix + branch, max_new_tokens=8, stop="\n", temperature=1.0)
        assert out["meta_info"]["cached_tokens"] >= shared - 1


def test_run_batch_caches_the_shared_prefix_and_answers_concurrently(
    http: httpx.Client,
    engine,  # noqa: ANN001
) -> None:
    prefix = (
        "You are a concise assistant. Answer each request in a single short sentence, "
        "without any preamble.\nTopic: "
    )
    post(http, {"text": prefix, "sampling_params": {"max_new_tokens": 0}})  # cache_prefix
    shared = engine.count_tokens(prefix)
    topics = ["cats", "dogs", "owls", "rivers"]
    with ThreadPoolExecutor(len(topics)) as pool:
        outs = list(
            pool.map(
                lambda t: gen(http, f"{prefix}{t}\nSentence:", max_new_tokens=8, stop="\n"),
                topics,
            )
        )
    assert all(o["meta_info"]["cached_tokens"] >= shared - 1 for o in outs)
    assert all(o["meta_info"]["finish_reason"]["type"] in ("stop", "length") for o in outs)


def test_streamed_gen_is_cumulative_text_with_meta_info(http: httpx.Client) -> None:
    params = {**GEN_DEFAULTS, "max_new_tokens": 10, "stop": [], "temperature": 1.0}
    body = {"text": "Tell me a story:", "sampling_params": params, "stream": True}
    with http.stream("POST", "/generate", json=body) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[5:]) for line in lines[:-1]]
    texts = [e["text"] for e in events]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
    assert all("meta_info" in e for e in events)
