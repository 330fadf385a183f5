"""Build the tiny random-weight models the end-to-end tests serve with vLLM on CPU.

Run with the CPU vLLM environment's Python (it has torch, transformers and tokenizers):
``python tiny_model.py OUT_DIR [llama|moe]``. The mixture-of-experts variant (a tiny Mixtral) exists so
the sweep can meet a real engine refusal of a pinned MoE backend, as the seed's campaign did. Nothing is downloaded: the tokenizer is trained here on generated text,
the weights are random. head_dim is 64 because vLLM's CPU attention refuses smaller heads (docs/facts.md).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

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
        out.append(" ".join(rng.choice(WORDS) if rng.random() > 0.2 else str(rng.randint(0, 9999)) for _ in range(n)))
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
    model = model.to(torch.bfloat16)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    fast.save_pretrained(tmp)
    tmp.rename(out_dir)


if __name__ == "__main__":
    build(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "llama")
