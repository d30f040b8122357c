"""Real PyTorch programs, ported by their imports alone: a nanoGPT-style GPT (its model.py and
train.py: AdamW parameter groups, cosine learning rate, clip_grad_norm_, GradScaler, a
checkpoint saved and resumed), the PyTorch examples' MNIST convolutional classifier
(Adadelta, StepLR, torch.accelerator) and its VAE, and the PyTorch tutorial's nn.Transformer
translation model (masks, greedy decoding, the whole model saved and loaded), at small sizes
on synthetic data.

Below the imports, each program is the PyTorch one (shrunk); what the ports could not keep
is noted where it is left out.
"""
import inspect
import math
import os
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

import gradtrace.autograd as torch
import gradtrace.autograd.nn as nn
import gradtrace.autograd.optim as optim
from gradtrace.autograd.nn import Transformer
from gradtrace.autograd.nn import functional as F
from gradtrace.autograd.optim.lr_scheduler import StepLR
from gradtrace.autograd.utils.data import DataLoader, TensorDataset


# =========================================================================== nanoGPT: model.py
class LayerNorm(nn.Module):
    """ LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False """

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):  # noqa: A002
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        assert self.flash

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
            is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


@dataclass
class GPTConfig:
    block_size: int = 8
    vocab_size: int = 17
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config

        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying
        self.transformer.wte.weight = self.lm_head.weight

        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, \
            f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)

        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)

        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters()}
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0},
        ]
        fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == 'cuda'
        extra_args = dict(fused=True) if use_fused else dict()
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
        return optimizer

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size \
                else idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# =========================================================================== nanoGPT: train.py
def nanogpt_train(out_dir, max_iters, init_from='scratch', eval_interval=3):
    """train.py's loop (one process, CPU), returning the loss of every iteration it ran."""
    batch_size, block_size = 4, 8
    learning_rate, weight_decay, beta1, beta2, grad_clip = 6e-3, 1e-1, 0.9, 0.95, 1.0
    warmup_iters, lr_decay_iters, min_lr = 2, 10, 6e-4
    device = 'cpu'
    dtype = 'float32'   # nanoGPT: 'bfloat16' if supported; there is no bfloat16 here
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    # nanoGPT's dict also maps 'bfloat16': torch.bfloat16, which NumPy cannot represent.
    ptdtype = {'float32': torch.float32, 'float16': torch.float16}[dtype]
    ctx = nullcontext() if device_type == 'cpu' else \
        torch.amp.autocast(device_type=device_type, dtype=ptdtype)

    # A synthetic "dataset": a token stream with structure to learn (counting mod vocab).
    rng = np.random.default_rng(0)
    train_data = ((np.arange(400) + rng.integers(0, 2, 400)) % 17).astype(np.uint16)
    val_data = ((np.arange(100) * 1) % 17).astype(np.uint16)

    def get_batch(split, it):
        data = train_data if split == 'train' else val_data
        # nanoGPT draws from the global generator; a generator per iteration makes the
        # resumed run draw the same batches as the uninterrupted one.
        g = torch.Generator().manual_seed(it)
        ix = torch.randint(len(data) - block_size, (batch_size,), generator=g)
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64))
                         for i in ix])
        x, y = x.to(device), y.to(device)
        return x, y

    iter_num = 0
    best_val_loss = 1e9
    model_args = dict(n_layer=2, n_head=2, n_embd=16, block_size=block_size, bias=True,
                      vocab_size=17, dropout=0.0)
    if init_from == 'scratch':
        gptconf = GPTConfig(**model_args)
        model = GPT(gptconf)
    elif init_from == 'resume':
        ckpt_path = os.path.join(out_dir, 'ckpt.pt')
        checkpoint = torch.load(ckpt_path, map_location=device)
        checkpoint_model_args = checkpoint['model_args']
        for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
            model_args[k] = checkpoint_model_args[k]
        gptconf = GPTConfig(**model_args)
        model = GPT(gptconf)
        state_dict = checkpoint['model']
        unwanted_prefix = '_orig_mod.'
        for k, v in list(state_dict.items()):
            if k.startswith(unwanted_prefix):
                state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
        model.load_state_dict(state_dict)
        iter_num = checkpoint['iter_num']
        best_val_loss = checkpoint['best_val_loss']
    model.to(device)

    scaler = torch.amp.GradScaler('cuda', enabled=(dtype == 'float16'))
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2),
                                           device_type)
    if init_from == 'resume':
        optimizer.load_state_dict(checkpoint['optimizer'])
    checkpoint = None

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ['train', 'val']:
            losses = torch.zeros(2)
            for k in range(2):
                X, Y = get_batch(split, 1000 + k)
                with ctx:
                    logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    losses = []
    X, Y = get_batch('train', iter_num)
    while True:
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        if iter_num % eval_interval == 0 and iter_num > 0:
            est = estimate_loss()
            if est['val'] < best_val_loss:
                best_val_loss = est['val'].item()
            checkpoint = {
                'model': model.state_dict(),
                'optimizer': optimizer.state_dict(),
                'model_args': model_args,
                'iter_num': iter_num,
                'best_val_loss': best_val_loss,
                'config': {'learning_rate': learning_rate, 'batch_size': batch_size},
            }
            torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))
        if iter_num >= max_iters:
            break
        with ctx:
            logits, loss = model(X, Y)
        X, Y = get_batch('train', iter_num + 1)
        scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        iter_num += 1
    return model, losses


def test_nanogpt_trains_and_resumes_from_its_checkpoint_identically(tmp_path):
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight_dir.mkdir()
    resumed_dir.mkdir()
    straight, straight_losses = nanogpt_train(str(straight_dir), max_iters=8)
    # Stop at the checkpoint of iteration 6, then resume from it to iteration 8.
    _, first_losses = nanogpt_train(str(resumed_dir), max_iters=6)
    resumed, resumed_losses = nanogpt_train(str(resumed_dir), max_iters=8, init_from='resume')
    assert first_losses + resumed_losses == straight_losses
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    assert straight_losses[-1] < straight_losses[0] - 0.1           # it learns
    # The tied embedding is one parameter under two state-dict names, as in PyTorch.
    assert resumed.lm_head.weight is resumed.transformer.wte.weight
    assert {"transformer.wte.weight", "lm_head.weight"} <= set(resumed.state_dict())
    out = resumed.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=5, top_k=3)
    assert out.shape == (1, 6) and out.dtype == torch.long


# =========================================================================== MNIST example
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def mnist_train(model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()


def mnist_test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    return test_loss, correct / len(test_loader.dataset)


def _synthetic_digits(n, seed):
    """8x8 images of 4 classes: a bright bar in one of four places, plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    images = 0.3 * rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    for i, c in enumerate(labels):
        if c < 2:
            images[i, 0, 1 + 4 * c:3 + 4 * c, :] += 1.5
        else:
            images[i, 0, :, 1 + 4 * (c - 2):3 + 4 * (c - 2)] += 1.5
    return torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))


def test_mnist_convnet_with_adadelta_and_steplr(tmp_path):
    use_accel = torch.accelerator.is_available() and False    # the example's --no-accel
    torch.manual_seed(1)
    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    train_kwargs = {'batch_size': 16, 'shuffle': True}
    test_kwargs = {'batch_size': 64}
    train_loader = torch.utils.data.DataLoader(TensorDataset(*_synthetic_digits(512, 0)),
                                               **train_kwargs)
    test_loader = torch.utils.data.DataLoader(TensorDataset(*_synthetic_digits(64, 1)),
                                              **test_kwargs)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    before, _ = mnist_test(model, device, test_loader)
    for epoch in range(1, 4):
        mnist_train(model, device, train_loader, optimizer, epoch)
        test_loss, accuracy = mnist_test(model, device, test_loader)
        scheduler.step()
    assert test_loss < before and accuracy > 0.9
    assert math.isclose(optimizer.param_groups[0]['lr'], 0.7 ** 3)
    torch.save(model.state_dict(), tmp_path / "mnist_cnn.pt")
    fresh = Net()
    fresh.load_state_dict(torch.load(tmp_path / "mnist_cnn.pt"))
    assert mnist_test(fresh, device, test_loader) == mnist_test(model, device, test_loader)


# =========================================================================== VAE example
class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc21 = nn.Linear(32, 4)
        self.fc22 = nn.Linear(32, 4)
        self.fc3 = nn.Linear(4, 32)
        self.fc4 = nn.Linear(32, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def test_vae_trains_samples_and_reconstructs():
    torch.manual_seed(1)
    device = torch.device("cpu")
    batch_size = 16
    # Images in [0, 1]: blurred blobs, as MNIST digits are mostly dark with bright strokes.
    rng = np.random.default_rng(0)
    images = np.zeros((96, 1, 8, 8), dtype=np.float32)
    for img, (r, c) in zip(images, rng.integers(1, 7, (96, 2))):
        img[0, r - 1:r + 2, c - 1:c + 2] = 0.9
    data = torch.from_numpy(images)
    train_loader = DataLoader(TensorDataset(data, torch.zeros(96, dtype=torch.long)),
                              batch_size=batch_size, shuffle=True)
    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def train(epoch):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(train_loader):
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
        return train_loss / len(train_loader.dataset)

    epoch_losses = [train(epoch) for epoch in range(1, 6)]
    assert epoch_losses[-1] < 0.8 * epoch_losses[0]
    model.eval()
    with torch.no_grad():
        for i, (data, _) in enumerate(train_loader):
            recon_batch, mu, logvar = model(data)
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(batch_size, 1, 8, 8)[:n]])
        sample = torch.randn(64, 4).to(device)
        sample = model.decode(sample).cpu()
    assert comparison.shape == (16, 1, 8, 8)
    assert sample.shape == (64, 64) and float(sample.min()) >= 0 and float(sample.max()) <= 1


# =========================================================================== nn.Transformer tutorial
# "Language Translation with nn.Transformer and torchtext", on a synthetic task (the target
# is the source reversed) instead of Multi30k.
DEVICE = torch.device('cpu')
PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
SRC_VOCAB_SIZE = TGT_VOCAB_SIZE = 10


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 64):
        super(PositionalEncoding, self).__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super(TokenEmbedding, self).__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size,
                 tgt_vocab_size, dim_feedforward=512, dropout=0.1):
        super(Seq2SeqTransformer, self).__init__()
        self.transformer = Transformer(d_model=emb_size, nhead=nhead,
                                       num_encoder_layers=num_encoder_layers,
                                       num_decoder_layers=num_decoder_layers,
                                       dim_feedforward=dim_feedforward, dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src, src_mask):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt, memory, tgt_mask):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory,
                                        tgt_mask)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz), device=DEVICE)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))
    return mask


def create_mask(src, tgt):
    src_seq_len = src.shape[0]
    tgt_seq_len = tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=DEVICE).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


def collate_fn(batch):
    src_batch, tgt_batch = [], []
    for src_sample, tgt_sample in batch:
        src_batch.append(src_sample)
        tgt_batch.append(tgt_sample)
    # The tutorial pads with nn.utils.rnn.pad_sequence; these samples come padded.
    return torch.stack(src_batch, dim=1), torch.stack(tgt_batch, dim=1)


def _reversal_pairs(n, seed):
    rng = np.random.default_rng(seed)
    src = np.full((n, 7), PAD_IDX, dtype=np.int64)
    tgt = np.full((n, 8), PAD_IDX, dtype=np.int64)
    for i, length in enumerate(rng.integers(3, 6, n)):
        words = rng.integers(4, SRC_VOCAB_SIZE, length)
        src[i, :length + 2] = [BOS_IDX, *words, EOS_IDX]
        tgt[i, :length + 2] = [BOS_IDX, *words[::-1], EOS_IDX]
    return torch.from_numpy(src), torch.from_numpy(tgt)


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    src = src.to(DEVICE)
    src_mask = src_mask.to(DEVICE)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(DEVICE)
    for i in range(max_len - 1):
        memory = memory.to(DEVICE)
        tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool)).to(DEVICE)
        out = model.decode(ys, memory, tgt_mask)
        out = out.transpose(0, 1)
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys


def test_transformer_tutorial_trains_decodes_and_saves_the_whole_model(tmp_path):
    torch.manual_seed(0)
    transformer = Seq2SeqTransformer(1, 1, 16, 2, SRC_VOCAB_SIZE, TGT_VOCAB_SIZE,
                                      dim_feedforward=32, dropout=0.0)
    for p in transformer.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    transformer = transformer.to(DEVICE)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=0.01, betas=(0.9, 0.98), eps=1e-9)
    train_dataloader = DataLoader(TensorDataset(*_reversal_pairs(64, 0)), batch_size=16,
                                  shuffle=True, collate_fn=collate_fn)

    def train_epoch(model, optimizer):
        model.train()
        losses = 0
        for src, tgt in train_dataloader:
            src = src.to(DEVICE)
            tgt = tgt.to(DEVICE)
            tgt_input = tgt[:-1, :]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask,
                           tgt_padding_mask, src_padding_mask)
            optimizer.zero_grad()
            tgt_out = tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            loss.backward()
            optimizer.step()
            losses += loss.item()
        return losses / len(list(train_dataloader))

    epoch_losses = [train_epoch(transformer, optimizer) for _ in range(8)]
    assert epoch_losses[-1] < 0.7 * epoch_losses[0]

    transformer.eval()
    src = _reversal_pairs(1, 5)[0].view(-1, 1)
    num_tokens = src.shape[0]
    src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
    tgt_tokens = greedy_decode(transformer, src, src_mask, max_len=num_tokens + 5,
                               start_symbol=BOS_IDX).flatten()
    assert tgt_tokens[0].item() == BOS_IDX and tgt_tokens.dtype == torch.long

    torch.save(transformer, tmp_path / "transformer.pt")
    loaded = torch.load(tmp_path / "transformer.pt", weights_only=False)
    again = greedy_decode(loaded, src, src_mask, max_len=num_tokens + 5, start_symbol=BOS_IDX)
    assert again.flatten().tolist() == tgt_tokens.tolist()
