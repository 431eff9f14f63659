#!/usr/bin/python3
"""The GPT tessera-train trains, written in Python PyTorch, for bench_engine's step-time ratio.

Same model (ALiBi attention, pre-norm blocks, GELU MLP, tied output layer), same loss, same
gradient clipping and AdamW (decay on matrices only), same batch and threads. Prints one JSON
line: {"step_seconds": median seconds per optimizer step, "steps": N, "loss": last loss}.
Run with Debian's /usr/bin/python3 (python3-torch, the same LibTorch version as tessera-train).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F


def alibi_slopes(n_heads):
    def power_of_two(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    closest = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = power_of_two(closest)
    if closest < n_heads:
        slopes += power_of_two(2 * closest)[0::2][: n_heads - closest]
    return slopes


class Attention(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.dh = h, d // h
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x, alibi, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh))
        scores = (scores + alibi).masked_fill(mask, float("-inf"))
        y = torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block(torch.nn.Module):
    def __init__(self, d, h, hidden):
        super().__init__()
        self.ln_1, self.attn = torch.nn.LayerNorm(d), Attention(d, h)
        self.ln_2 = torch.nn.LayerNorm(d)
        self.fc, self.fc_proj = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)

    def forward(self, x, alibi, mask):
        h = x + self.attn(self.ln_1(x), alibi, mask)
        return h + self.fc_proj(F.gelu(self.fc(self.ln_2(h))))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, d, h, layers, mlp_ratio):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(Block(d, h, int(mlp_ratio * d)) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.register_buffer("slopes", torch.tensor(alibi_slopes(h)).view(h, 1, 1))
        for name, p in self.named_parameters():
            if p.dim() == 1:
                torch.nn.init.ones_(p) if "ln_" in name and name.endswith("weight") else torch.nn.init.zeros_(p)
            else:
                torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if "proj.weight" in name else 0.02)

    def loss_sum(self, tokens, labels):
        t = tokens.shape[1]
        alibi = self.slopes * torch.arange(t, dtype=torch.float32).view(1, 1, t)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        x = self.wte(tokens)
        for block in self.blocks:
            x = block(x, alibi, mask)
        logits = torch.matmul(self.ln_f(x), self.wte.weight.t())
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum")


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("vocab", 4096), ("d-model", 256), ("heads", 8), ("layers", 4),
                          ("seq", 256), ("batch", 8), ("threads", 2), ("steps", 20), ("warmup", 3)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--mlp-ratio", type=float, default=4.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(17)
    model = Gpt(a.vocab, a.d_model, a.heads, a.layers, a.mlp_ratio)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    data = torch.randint(0, a.vocab, (a.steps + a.warmup, a.batch, a.seq + 1))
    times, loss = [], 0.0
    for i in range(a.steps + a.warmup):
        start = time.perf_counter()
        rows = data[i]
        opt.zero_grad(set_to_none=False)
        l = model.loss_sum(rows[:, :-1], rows[:, 1:])
        (l / (a.batch * a.seq)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss = l.item() / (a.batch * a.seq)
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    print(json.dumps({"step_seconds": statistics.median(times), "steps": a.steps, "loss": loss}))


if __name__ == "__main__":
    main()
