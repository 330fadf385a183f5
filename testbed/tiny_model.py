"""Build the tiny models the end-to-end tests serve with vLLM on CPU.

Run with the CPU vLLM environment's Python (it has torch, transformers and tokenizers):
``python tiny_model.py OUT_DIR [llama|moe]``. The mixture-of-experts variant (a tiny Mixtral) exists so
the sweep can meet a real engine refusal of a pinned MoE backend, as the seed's campaign did. Nothing is
downloaded: the tokenizer is trained here on generated text, the weights are random. head_dim is 64
because vLLM's CPU attention refuses smaller heads (docs/facts.md).

A random-weight model answers nothing and its next-token distributions are near uniform, so two more
are derived from the Llama: ``python tiny_model.py train BASE_DIR OUT_DIR`` trains it for well under a
minute on the tripwire's twenty questions (agents/tripwire/items.py) until every answer token is
predicted with probability above 0.95 (its tripwire passes 20/20 on a real engine), and ``python
tiny_model.py degrade TRAINED_DIR OUT_DIR SIGMA`` adds seeded Gaussian noise of SIGMA times each weight
matrix's spread (a broken build: its answers go wrong and its distributions move, which the tripwire and
kldiff must both see).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRAIN_LR = 4e-3
TRAIN_MAX_STEPS = 400
ANSWER_NLL = 0.05
"""Training stops once every answer token's negative log-likelihood is below this (probability > 0.95)."""

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
WORDS = (
    "the a of to and in is it that for on with as was at by be this from or an are which but not have "
    "one two three four five six seven eight nine ten paris london capital water boils degrees answer "
    "question model token kernel power limit throughput benchmark campaign server box gpu card memory"
).split()


def corpus(lines: int = 4000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        n = rng.randint(4, 24)
        out.append(
            " ".join(rng.choice(WORDS) if rng.random() > 0.2 else str(rng.randint(0, 9999)) for _ in range(n))
        )
    return out


def build(out_dir: Path, arch: str = "llama") -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        MixtralConfig,
        MixtralForCausalLM,
        PreTrainedTokenizerFast,
    )

    special = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    common = dict(
        vocab_size=len(fast),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        torch_dtype="bfloat16",
    )
    if arch == "moe":
        model = MixtralForCausalLM(MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    _save(model, fast, out_dir)


def _save(model: Any, tokenizer: Any, out_dir: Path) -> None:
    import torch

    tmp = out_dir.with_name(out_dir.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out_dir)


def qa_sequences(tokenizer: Any) -> list[tuple[list[int], int]]:
    """Each tripwire question through the chat template, then its answer and end of sequence, as the server
    renders a chat request; with the length of the prompt part."""
    sys.path.insert(0, str(REPO))
    from agents.tripwire.items import ITEMS

    out = []
    for item in ITEMS:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": item.prompt}], add_generation_prompt=True, tokenize=False
        )
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        answer = tokenizer(item.expect[0], add_special_tokens=False)["input_ids"]
        out.append((list(prompt) + list(answer) + [tokenizer.eos_token_id], len(prompt)))
    return out


def train(base_dir: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    torch.set_num_threads(1)  # a shared 2-core machine: two threads fight each other and the servers
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    model = LlamaForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    sequences = qa_sequences(tokenizer)
    width = max(len(ids) for ids, _ in sequences)
    ids = torch.full((len(sequences), width), tokenizer.pad_token_id)
    mask = torch.zeros_like(ids)
    for i, (seq, _) in enumerate(sequences):
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR, weight_decay=0.0)
    started = time.monotonic()
    model.train()
    steps = 0
    while True:
        steps += 1
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        with torch.no_grad():
            nll = -torch.log_softmax(out.logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
            worst = max(
                float(nll[i, start - 1 : len(seq) - 1].max()) for i, (seq, start) in enumerate(sequences)
            )
        if worst < ANSWER_NLL:
            break
        if steps == TRAIN_MAX_STEPS:
            raise SystemExit(f"training did not converge in {steps} steps (worst answer NLL {worst:.3f})")
    print(
        f"trained {steps} steps in {time.monotonic() - started:.0f} s, loss {float(out.loss):.3f}",
        file=sys.stderr,
    )
    _save(model, tokenizer, out_dir)


def degrade(src_dir: Path, out_dir: Path, sigma: float) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(src_dir)
    model = LlamaForCausalLM.from_pretrained(src_dir, torch_dtype=torch.float32)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:  # weight matrices; norms stay as trained
                param.add_(torch.randn(param.shape, generator=generator) * param.std() * sigma)
    _save(model, tokenizer, out_dir)


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "degrade":
        degrade(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]))
    else:
        build(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "llama")
