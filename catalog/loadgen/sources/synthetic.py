"""Synthetic prompts with chosen input and output lengths.

`--synthetic "input=256,output=128"`: each length is a whole number, a uniform range (`128..512`) or a normal
distribution (`256+-64`, clipped at 1), drawn per request from the run's seed. Input text is made of words:

- tokenizer-free (the default): common short English words, each about one token to BPE tokenizers (a word with its
  leading space is one token in GPT-2-style vocabularies; the count is approximate, and said so);
- exact (`--tokenizer MODEL.gguf`): random tokens of that model's vocabulary (llama.cpp's tokenizer, vocabulary only,
  from the `local` extra), decoded and re-tokenized until the user message is exactly the asked number of tokens
  (the chat template's own tokens come on top, as in every server's count).

The output length is asked with `max_tokens`; `--ignore-eos` also sends `ignore_eos: true` (vLLM) and `min_tokens`
(llama.cpp, vLLM), which make a server generate exactly that many tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import orjson

from bench.catalog.loadgen.work import LoadRequest, SourceOptions, Work, workload_source
from bench.core.errors import BenchError

# Short, common words: one BPE token each (with the leading space) in GPT-2, Llama and SmolLM2 vocabularies.
_WORD_TEXT = (
    "the of and to in is was for on are with as his they at be this from have or by one had not but what all were "
    "when we there can an your which their said if do will each about how up out them then she many some so these "
    "would other into has more her two like him see time could no make than first been its who now people my made "
    "over did down only way find use may water long little very after words called just where most know get through "
    "back much go good new write our me man too any day same right look think also around another came come work "
    "three word must because does part even place well such here take why help put different away again off went old "
    "number great tell men say small every found still between name should home big give air line set own under read "
    "last never us left end along while might next sound below saw something thought both few those always looked show "
    "large often together asked house world going want school important until form food keep children feet land side "
    "without boy once animals life enough took sometimes four head above kind began almost live page got earth need "
    "far hand high year mother light parts country father let night following picture being study second eyes soon "
    "times story boys since white days ever paper hard near sentence better best across during today others however "
    "sure means knew try told young miles sun ways thing whole hear example heard several change answer room sea "
    "against top turned learn point city play toward five using himself usually money seen car morning"
)
WORDS = tuple(_WORD_TEXT.split())

_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
_NORMAL = re.compile(r"^(\d+(?:\.\d+)?)\+-(\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class Lengths:
    """A length distribution: fixed, uniform over [low, high], or normal (mean, sd) clipped at 1."""

    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng: np.random.Generator) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return int(rng.integers(int(self.a), int(self.b) + 1))
        return max(1, round(float(rng.normal(self.a, self.b))))


def parse_lengths(text: str, name: str) -> Lengths:
    text = text.strip()
    if text.isdigit() and int(text) > 0:
        return Lengths("fixed", int(text))
    found = _RANGE.match(text)
    if found and 0 < int(found.group(1)) <= int(found.group(2)):
        return Lengths("uniform", int(found.group(1)), int(found.group(2)))
    found = _NORMAL.match(text)
    if found and float(found.group(1)) > 0:
        return Lengths("normal", float(found.group(1)), float(found.group(2)))
    raise BenchError(f"--synthetic {name}={text!r}: give a number (256), a range (128..512) or a mean+-sd (256+-64)")


def parse_spec(text: str | None) -> tuple[Lengths, Lengths]:
    values = {"input": "256", "output": "128"}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, _, value = part.partition("=")
        if key.strip() not in values or not value:
            raise BenchError(f"--synthetic {text!r}: give input=N,output=N (each a number, LOW..HIGH or MEAN+-SD)")
        values[key.strip()] = value
    return parse_lengths(values["input"], "input"), parse_lengths(values["output"], "output")


Prompt = Callable[[int, np.random.Generator], str]


def words_prompt(n: int, rng: np.random.Generator) -> str:
    picks = rng.integers(0, len(WORDS), n)
    return " ".join(WORDS[i] for i in picks.tolist())


def gguf_prompt(path: str) -> Prompt:
    """Prompts of exactly n tokens of the GGUF model's tokenizer (its vocabulary only is loaded)."""
    try:
        from llama_cpp import Llama
    except ImportError:
        raise BenchError("--tokenizer needs llama-cpp-python: pip install 'llm-gateway-bench[local]'") from None
    try:
        vocab = Llama(model_path=path, vocab_only=True, verbose=False)
    except (ValueError, OSError) as exc:
        raise BenchError(f"--tokenizer {path}: cannot load its vocabulary ({exc}); give a .gguf model file") from None
    # Ordinary tokens only: never the control tokens a chat template is made of (`<|im_start|>`...).
    specials = {vocab.token_bos(), vocab.token_eos()}
    usable = np.asarray(
        [t for t in range(vocab.n_vocab()) if t not in specials and not vocab.detokenize([t]).startswith(b"<|")]
    )

    def count(text: str) -> list[int]:
        return list(vocab.tokenize(text.encode(), add_bos=False, special=False))

    def prompt(n: int, rng: np.random.Generator) -> str:
        ids = usable[rng.integers(0, len(usable), n)].tolist()
        text = vocab.detokenize(ids).decode(errors="ignore")
        # Decoding and encoding again merges or splits some tokens: trim or pad with words until the count is n.
        for _ in range(64):
            tokens = count(text)
            if len(tokens) == n:
                return text
            if len(tokens) > n:
                text = vocab.detokenize(tokens[:n]).decode(errors="ignore")
            else:
                text = text + " " + words_prompt(n - len(tokens), rng)
        raise BenchError(f"--tokenizer {path}: could not make a prompt of exactly {n} tokens")

    return prompt


@workload_source("synthetic", help="synthetic prompts of chosen input and output lengths")
def synthetic(options: SourceOptions) -> Iterator[Work]:
    if not options.models:
        raise BenchError("synthetic prompts need a model: pass --model M")
    inputs, outputs = parse_spec(options.arg)
    prompt = gguf_prompt(options.tokenizer) if options.tokenizer else words_prompt
    force = options.extra.get("ignore_eos") == "1"
    return _requests(inputs, outputs, prompt, options, force)


def _requests(inputs: Lengths, outputs: Lengths, prompt: Prompt, options: SourceOptions, force: bool) -> Iterator[Work]:
    rng = np.random.default_rng(options.seed)
    for i in range(1 << 62):
        model = options.models[i % len(options.models)]
        out = outputs.draw(rng)
        body: dict[str, object] = {
            "model": model,
            "messages": [{"role": "user", "content": prompt(inputs.draw(rng), rng)}],
            "max_tokens": out,
        }
        if force:
            body["ignore_eos"] = True
            body["min_tokens"] = out
        if options.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        yield LoadRequest(path="/v1/chat/completions", body=orjson.dumps(body), origin=f"synthetic:{i}", model=model)
