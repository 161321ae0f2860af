"""JSON-schema-constrained decoding with the real SmolLM2 model and tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import torch

from engine.base import InvalidRequest
from engine.embedded.grammar import GrammarCompiler, GrammarConstraint, GrammarViolation, mask_rows

MAX_TOKENS = 80

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
    },
    "required": ["name", "age", "color"],
}
ITEMS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "item": {"type": "string", "maxLength": 12},
            "qty": {"type": "integer", "minimum": 1, "maximum": 9},
        },
        "required": ["item", "qty"],
    },
    "minItems": 1,
    "maxItems": 2,
}
NESTED = {
    "type": "object",
    "properties": {
        "server": {
            "type": "object",
            "properties": {
                "enabled": {"type": "boolean"},
                "load": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["enabled", "load"],
        },
        "ok": {"type": "boolean"},
    },
    "required": ["server", "ok"],
}
CASES = {
    "person": (PERSON, "Describe a person as JSON with name, age and favourite color."),
    "items": (ITEMS, "List two things to buy as a JSON array of {item, qty}."),
    "nested": (NESTED, "Give a JSON status: server {enabled, load} and ok."),
}


def validate(value: object, schema: dict) -> None:
    jsonschema.validate(value, schema)


@pytest.fixture(scope="module")
def lm(model_dir: Path):  # noqa: ANN201
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    return tokenizer, model


@pytest.fixture(scope="module")
def compiler(lm) -> GrammarCompiler:  # noqa: ANN001
    tokenizer, model = lm
    return GrammarCompiler(tokenizer, model.config.vocab_size)


def prompt_ids(tokenizer, case: str) -> list[int]:  # noqa: ANN001
    messages = [{"role": "user", "content": f"{CASES[case][1]} Reply with JSON only."}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(prompt, add_special_tokens=False)["input_ids"]


def constraint_for(compiler: GrammarCompiler, case: str) -> GrammarConstraint:
    return GrammarConstraint(compiler.compile_json_schema(json.dumps(CASES[case][0])))


@torch.inference_mode()
def generate(lm, compiler: GrammarCompiler, case: str) -> str:  # noqa: ANN001
    """One greedy request, shaped like the engine's loop: mask -> sample -> accept -> stop?"""
    from transformers import DynamicCache

    tokenizer, model = lm
    constraint = constraint_for(compiler, case)
    ids, out = prompt_ids(tokenizer, case), []
    cache = DynamicCache(config=model.config)
    for _ in range(MAX_TOKENS):
        res = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, logits_to_keep=1)
        cache = res.cache
        token = int(torch.argmax(constraint.mask(res.logits[0, -1])).item())
        constraint.accept(token)
        out.append(token)
        if constraint.is_terminated():
            break
        ids = [token]
    assert constraint.is_terminated(), f"no complete JSON in {MAX_TOKENS} tokens"
    return tokenizer.decode(out, skip_special_tokens=True)


@torch.inference_mode()
def generate_batch(lm, compiler: GrammarCompiler, temperature: float, seed: int = 1234) -> dict:  # noqa: ANN001
    """Every case as one left-padded batch, masked with ``mask_rows``, seeded sampling."""
    from transformers import DynamicCache

    tokenizer, model = lm
    names = sorted(CASES)
    constraints = [constraint_for(compiler, name) for name in names]
    prompts = [prompt_ids(tokenizer, name) for name in names]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    cache, gen = DynamicCache(config=model.config), torch.Generator().manual_seed(seed)
    outs: list[list[int]] = [[] for _ in names]
    for _ in range(MAX_TOKENS):
        pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, -ids.shape[1] :]
        step = {"attention_mask": attn, "position_ids": pos, "use_cache": True}
        res = model(input_ids=ids, cache=cache, logits_to_keep=1, **step)
        cache = res.cache
        live = [None if c.is_terminated() else c for c in constraints]
        logits = mask_rows(res.logits[:, -1].float(), live)
        probs = torch.softmax(logits / temperature, dim=-1)
        tokens = torch.multinomial(probs, 1, generator=gen)
        for row, constraint in enumerate(live):
            if constraint is not None:
                constraint.accept(int(tokens[row]))
                outs[row].append(int(tokens[row]))
        if all(c.is_terminated() for c in constraints):
            break
        ids, attn = tokens, torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
    for name, constraint in zip(names, constraints, strict=True):
        assert constraint.is_terminated(), f"{name}: no complete JSON in {MAX_TOKENS} tokens"
    return {
        n: tokenizer.decode(o, skip_special_tokens=True) for n, o in zip(names, outs, strict=True)
    }


@pytest.fixture(scope="module")
def sampled(lm, compiler: GrammarCompiler) -> dict[str, str]:  # noqa: ANN001
    return generate_batch(lm, compiler, temperature=1.0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_greedy_output_validates(lm, compiler: GrammarCompiler, case: str) -> None:  # noqa: ANN001
    text = generate(lm, compiler, case)
    validate(json.loads(text), CASES[case][0])


@pytest.mark.parametrize("case", sorted(CASES))
def test_sampled_batch_output_validates(sampled: dict[str, str], case: str) -> None:
    validate(json.loads(sampled[case]), CASES[case][0])


@pytest.mark.parametrize(
    "bad",
    ["{not json", "[1, 2]", '{"type": "frobnicate"}', '{"$ref": "#/missing"}', ""],
)
def test_invalid_schema_raises(compiler: GrammarCompiler, bad: str) -> None:
    with pytest.raises(InvalidRequest, match="json_schema"):
        compiler.compile_json_schema(bad)


def test_compile_cache_returns_same_object(compiler: GrammarCompiler) -> None:
    schema = json.dumps(PERSON)
    assert compiler.compile_json_schema(schema) is compiler.compile_json_schema(schema)
    assert compiler.compile_json_schema(schema) is not compiler.compile_json_schema(
        json.dumps(NESTED)
    )


def test_mask_rows_masks_only_constrained_rows(lm, compiler: GrammarCompiler) -> None:  # noqa: ANN001
    tokenizer, model = lm
    vocab = model.config.vocab_size
    constraint = GrammarConstraint(compiler.compile_json_schema(json.dumps(PERSON)))
    logits = torch.randn(3, vocab)
    before = logits.clone()
    mask_rows(logits, [None, constraint, None])
    assert torch.equal(logits[0], before[0]) and torch.equal(logits[2], before[2])
    allowed = torch.isfinite(logits[1]).nonzero().flatten().tolist()
    assert allowed and len(allowed) < vocab // 100  # an object must open with "{"
    assert all(tokenizer.decode([t]).startswith("{") for t in allowed)
    assert tokenizer.eos_token_id not in allowed
    padded = torch.zeros(2, vocab + 64)  # logits wider than the vocabulary: padding is masked
    mask_rows(padded, [constraint, None])
    assert torch.isinf(padded[0, vocab:]).all() and torch.equal(padded[1], torch.zeros(vocab + 64))


def test_terminates_when_only_stop_token_may_follow(lm, compiler: GrammarCompiler) -> None:  # noqa: ANN001
    tokenizer, _ = lm
    constraint = GrammarConstraint(compiler.compile_json_schema(json.dumps(PERSON)))
    text = '{"name": "Ann", "age": 30, "color": "red"}'
    for token in tokenizer.encode(text, add_special_tokens=False):
        assert not constraint.is_terminated()
        constraint.accept(token)
    assert constraint.is_completed() and constraint.is_terminated()


def test_open_ended_value_ends_with_stop_token(lm, compiler: GrammarCompiler) -> None:  # noqa: ANN001
    """A bare integer may always grow, so it ends only when the stop token is accepted."""
    tokenizer, _ = lm
    constraint = GrammarConstraint(compiler.compile_json_schema('{"type": "integer"}'))
    for token in tokenizer.encode("12", add_special_tokens=False):
        constraint.accept(token)
    logits = constraint.mask(torch.zeros(constraint.vocab_size))
    assert constraint.is_completed() and not constraint.is_terminated()
    assert torch.isfinite(logits[tokenizer.eos_token_id])
    assert torch.isfinite(logits[tokenizer.convert_tokens_to_ids("3")])
    constraint.accept(tokenizer.eos_token_id)
    assert constraint.is_terminated()
    with pytest.raises(GrammarViolation):
        constraint.accept(tokenizer.convert_tokens_to_ids("3"))
