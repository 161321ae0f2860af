"""Constrained decoding with xgrammar: a JSON Schema, a regular expression or an EBNF grammar
(SGLang's ``json_schema``, ``regex`` and ``ebnf``), compiled once per text, masked every step.

The engine's decode loop, per constrained request::

    constraint = GrammarConstraint(compiler.compile("regex", request.regex))
    ...
    logits = constraint.mask(logits)  # disallowed tokens -> -inf
    token = sample_next(logits, ...)
    constraint.accept(token)
    if constraint.is_terminated():  # the output is complete: finish with reason "stop"
        ...

Once the output is complete and only a stop token may follow, ``is_terminated()`` is already
true, so the engine ends without spending a forward pass on the stop token.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
import xgrammar as xgr

from engine.base import EngineError, InvalidRequest

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

CACHE_SIZE = 64
_LOG_PREFIX = re.compile(r"^\[[^\]]*\]\s*\S+:\d+:\s*")  # "[08:41:23] /path/x.cc:12: "


class GrammarViolation(EngineError):
    """A token outside the grammar was accepted: the sampler ignored the mask (an engine bug)."""

    kind = "grammar_violation"


GRAMMAR_KINDS = ("json_schema", "regex", "ebnf", "json_object")


@dataclass(frozen=True, eq=False)
class Grammar:
    """A compiled grammar plus what a matcher needs to know about the vocabulary."""

    compiled: xgr.CompiledGrammar
    vocab_size: int
    # packed like an xgrammar bitmask: set bits are tokens that are NOT stop tokens
    non_stop_bits: torch.Tensor


class GrammarCompiler:
    """Compiles grammars for one tokenizer; built once per engine, safe across threads."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        vocab_size: int,
        stop_token_ids: Sequence[int] | None = None,
        *,
        any_whitespace: bool = False,
        max_threads: int = 2,
    ) -> None:
        """``vocab_size`` is ``model.config.vocab_size`` (the logits width, which may exceed
        ``len(tokenizer)``); ``stop_token_ids`` default to what xgrammar reads from the
        tokenizer. ``any_whitespace=False`` keeps small models from wandering into whitespace."""
        stops = list(stop_token_ids) if stop_token_ids else None
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stops
        )
        self.vocab_size = vocab_size
        self.stop_token_ids: tuple[int, ...] = tuple(info.stop_token_ids)
        self._compiler = xgr.GrammarCompiler(info, max_threads=max_threads, cache_enabled=False)
        self._any_whitespace = any_whitespace
        self._non_stop_bits = _pack_bits(vocab_size, self.stop_token_ids)
        self._cache: OrderedDict[tuple[str, str], Grammar] = OrderedDict()
        self._lock = threading.Lock()

    def compile(self, kind: str, text: str) -> Grammar:
        """The grammar of ``kind`` (one of ``GRAMMAR_KINDS``; ``text`` is ignored for
        ``json_object``: any JSON object) from an LRU cache of 64 grammars.

        Raises ``InvalidRequest`` naming the parameter when the text does not compile."""
        if kind not in GRAMMAR_KINDS:
            raise ValueError(f"unknown grammar kind {kind!r}")
        key = (kind, text)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        grammar = Grammar(self._compile(kind, text), self.vocab_size, self._non_stop_bits)
        with self._lock:
            grammar = self._cache.setdefault(key, grammar)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return grammar

    def compile_json_schema(self, schema: str) -> Grammar:
        """``compile("json_schema", schema)``."""
        return self.compile("json_schema", schema)

    def _compile(self, kind: str, text: str) -> xgr.CompiledGrammar:
        if kind == "json_object":
            return self._compiler.compile_builtin_json_grammar()
        if kind == "json_schema":
            _check_schema_text(text)
        try:
            if kind == "json_schema":
                return self._compiler.compile_json_schema(
                    text, any_whitespace=self._any_whitespace, strict_mode=True
                )
            if kind == "regex":
                return self._compiler.compile_regex(text)
            return self._compiler.compile_grammar(text, root_rule_name="root")
        except (RuntimeError, ValueError, TypeError) as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            reason = _LOG_PREFIX.sub("", lines[0])
            what = {
                "json_schema": "json_schema is not a supported JSON Schema",
                "regex": "regex is not a valid regular expression",
                "ebnf": "ebnf is not a valid EBNF grammar (with a root rule)",
            }[kind]
            raise InvalidRequest(f"{what}: {reason}") from None


def _check_schema_text(schema: str) -> None:
    try:
        parsed = json.loads(schema)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"json_schema is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict | bool):
        raise InvalidRequest("json_schema must be a JSON object (or a boolean)")


class GrammarConstraint:
    """The grammar state of one request: masks logits, accepts tokens, knows when it ends."""

    def __init__(self, grammar: Grammar) -> None:
        self._grammar = grammar
        self._matcher = xgr.GrammarMatcher(grammar.compiled)
        self._bitmask = xgr.allocate_token_bitmask(1, grammar.vocab_size)
        self._bitmask_fresh = False  # whether _bitmask holds the mask for the current state
        self._done = False

    @property
    def vocab_size(self) -> int:
        """The grammar's vocabulary size (``model.config.vocab_size``)."""
        return self._grammar.vocab_size

    def bitmask(self) -> torch.Tensor:
        """The allowed-token bitmask for the next step, shape ``[1, ceil(V / 32)]`` int32."""
        if not self._bitmask_fresh:
            self._matcher.fill_next_token_bitmask(self._bitmask)
            self._bitmask_fresh = True
        return self._bitmask

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """Set disallowed tokens of 1-D ``logits`` to -inf, in place; returns ``logits``."""
        if logits.dim() != 1:
            raise ValueError(f"mask() takes 1-D logits, got shape {tuple(logits.shape)}")
        return mask_rows(logits.unsqueeze(0), [self])[0]

    def accept(self, token_id: int) -> None:
        """Advance the grammar by the sampled token; raises ``GrammarViolation`` if disallowed."""
        if self._done or not self._matcher.accept_token(int(token_id)):
            raise GrammarViolation(f"token {token_id} is not allowed by the grammar here")
        self._bitmask_fresh = False
        if self._matcher.is_terminated():
            self._done = True
        elif self._matcher.is_completed():
            # complete; it is the end when nothing but a stop token may follow
            self._done = not bool((self.bitmask() & self._grammar.non_stop_bits).any())

    def is_terminated(self) -> bool:
        """True once the output is complete and only a stop token (or nothing) may follow."""
        return self._done

    def is_completed(self) -> bool:
        """True when the text so far is complete (more may still be allowed)."""
        return self._matcher.is_completed()


def mask_rows(
    logits: torch.Tensor, constraints: Sequence[GrammarConstraint | None]
) -> torch.Tensor:
    """Mask each row of ``logits[B, V]`` by its constraint, in place; ``None`` rows are untouched.

    Columns past the grammar's vocab size (padding) are set to -inf in constrained rows."""
    if logits.dim() != 2 or logits.shape[0] != len(constraints):
        raise ValueError(f"logits {tuple(logits.shape)} do not match {len(constraints)} rows")
    rows = [i for i, c in enumerate(constraints) if c is not None]
    if not rows:
        return logits
    masks = [c.bitmask() for c in constraints if c is not None]
    vocab = min(c.vocab_size for c in constraints if c is not None)
    bitmask = torch.zeros((logits.shape[0], masks[0].shape[1]), dtype=torch.int32)
    bitmask[rows] = torch.cat(masks)
    width = min(vocab, logits.shape[1])
    xgr.apply_token_bitmask_inplace(
        logits, bitmask.to(logits.device), vocab_size=width, indices=rows
    )
    if logits.shape[1] > width:
        logits[rows, width:] = float("-inf")
    return logits


def _pack_bits(vocab_size: int, off_ids: Sequence[int]) -> torch.Tensor:
    """An xgrammar-style bitmask ``[1, ceil(V / 32)]`` with every token but ``off_ids`` set."""
    words = (vocab_size + 31) // 32
    bits = np.zeros(words * 32, dtype=np.uint8)
    bits[:vocab_size] = 1
    bits[[i for i in off_ids if 0 <= i < vocab_size]] = 0
    packed = np.packbits(bits, bitorder="little").view("<i4").astype(np.int32)
    return torch.from_numpy(packed.copy()).reshape(1, words)
