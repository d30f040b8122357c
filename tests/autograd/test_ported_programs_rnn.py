"""Two more PyTorch examples, ported by their imports alone: the word-language-model (its
data.py, model.py with the LSTM/GRU/RNN_TANH/Transformer choices, and main.py's training
loop: clip_grad_norm_, a manual SGD step ``p.data.add_(p.grad, alpha=-lr)``,
repackage_hidden, batchify/get_batch, the learning rate annealed on validation) and the
time-sequence-prediction example (two LSTMCells, LBFGS with a closure, predicting the future).

Below the imports, each program is the PyTorch one; its command-line arguments are a
namespace, and the data is small and synthetic. The harness (``_*`` functions) gives both
libraries the same starting weights, so the losses can be compared: the same file, with
``import torch`` (and ``torch.nn``, ``torch.optim``...) in place of the gradtrace imports,
runs under PyTorch 2.13, whose float64 losses are pinned below.
"""
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest

import gradtrace.autograd as torch
import gradtrace.autograd.nn as nn
import gradtrace.autograd.nn.functional as F
import gradtrace.autograd.optim as optim


# =========================================================================== word LM: data.py
class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Tokenizes a text file."""
        assert os.path.exists(path)
        # Add words to the dictionary
        with open(path, 'r', encoding="utf8") as f:
            for line in f:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)

        # Tokenize file content
        with open(path, 'r', encoding="utf8") as f:
            idss = []
            for line in f:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)

        return ids


# =========================================================================== word LM: model.py
class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            try:
                nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
            except KeyError as e:
                raise ValueError("""An invalid option for `--model` was supplied,
                                 options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']""") from e
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

        # Optionally tie weights as in:
        # "Using the Output Embedding to Improve Language Models" (Press & Wolf 2016)
        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight

        self.init_weights()

        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):  # noqa: A002
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


# Temporarily leave PositionalEncoding module here. Will be moved somewhere else.
class PositionalEncoding(nn.Module):
    r"""Inject some information about the relative or absolute position of the tokens in the
    sequence (sine and cosine functions of different frequencies)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)

        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    """Container module with an encoder, a recurrent or transformer module, and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                                               num_encoder_layers=nlayers)
        self.model_type = 'Transformer'
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)

        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)

        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = self._generate_square_subsequent_mask(len(src)).to(device)
                self.src_mask = mask
        else:
            self.src_mask = None

        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


# =========================================================================== word LM: main.py
def word_language_model_main(args, init=None):
    """main.py from ``device = ...`` to the test-set evaluation (``init``: the harness's hook
    on the freshly built model). Returns (training losses, validation losses, test loss)."""
    device = torch.device("cpu")
    corpus = Corpus(args.data)

    def batchify(data, bsz):
        # Work out how cleanly we can divide the dataset into bsz parts.
        nbatch = data.size(0) // bsz
        # Trim off any extra elements that wouldn't cleanly fit (remainders).
        data = data.narrow(0, 0, nbatch * bsz)
        # Evenly divide the data across the bsz batches.
        data = data.view(bsz, -1).t().contiguous()
        return data.to(device)

    eval_batch_size = 10
    train_data = batchify(corpus.train, args.batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    test_data = batchify(corpus.test, eval_batch_size)

    ntokens = len(corpus.dictionary)
    if args.model == 'Transformer':
        model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers,
                                 args.dropout).to(device)
    else:
        model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout,
                         args.tied).to(device)
    if init is not None:
        init(model)

    criterion = nn.NLLLoss()

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""

        if isinstance(h, torch.Tensor):
            return h.detach()
        else:
            return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i):
        seq_len = min(args.bptt, len(source) - 1 - i)
        data = source[i:i + seq_len]
        target = source[i + 1:i + 1 + seq_len].view(-1)
        return data, target

    def evaluate(data_source):
        # Turn on evaluation mode which disables dropout.
        model.eval()
        total_loss = 0.
        ntokens = len(corpus.dictionary)
        if args.model != 'Transformer':
            hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i)
                if args.model == 'Transformer':
                    output = model(data)
                    output = output.view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    losses = []

    def train():
        # Turn on training mode which enables dropout.
        model.train()
        total_loss = 0.
        ntokens = len(corpus.dictionary)
        if args.model != 'Transformer':
            hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i)
            # Starting each batch, we detach the hidden state from how it was previously produced.
            # If we didn't, the model would try backpropagating all the way to start of the dataset.
            model.zero_grad()
            if args.model == 'Transformer':
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()

            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)

            total_loss += loss.item()
            losses.append(loss.item())

            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | '
                      'loss {:5.2f} | ppl {:8.2f}'.format(
                          epoch, batch, len(train_data) // args.bptt, lr,
                          cur_loss, math.exp(cur_loss)))
                total_loss = 0

    # Loop over epochs.
    lr = args.lr
    best_val_loss = None
    val_losses = []
    for epoch in range(1, args.epochs + 1):
        train()
        val_loss = evaluate(val_data)
        val_losses.append(val_loss)
        print('| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}'.format(
            epoch, val_loss, math.exp(val_loss)))
        # Save the model if the validation loss is the best we've seen so far.
        if not best_val_loss or val_loss < best_val_loss:
            with open(args.save, 'wb') as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen in the validation dataset.
            lr /= 4.0

    # Load the best saved model.
    with open(args.save, 'rb') as f:
        model = torch.load(f, weights_only=False)
        # after load the rnn params are not a continuous chunk of memory
        # this makes them a continuous chunk, and will speed up forward pass
        # Currently, only rnn model supports flatten_parameters function.
        if args.model in ['RNN_TANH', 'RNN_RELU', 'LSTM', 'GRU']:
            model.rnn.flatten_parameters()

    # Run on test data.
    test_loss = evaluate(test_data)
    return losses, val_losses, test_loss


# =========================================================================== time sequence
class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):  # noqa: A002
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def generate_sine_wave(path, T=20, L=1000, N=100):
    """generate_sine_wave.py (its sizes as arguments)."""
    np.random.seed(2)
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype('float64')
    torch.save(data, open(path, 'wb'))


def time_sequence_prediction_main(opt, path, init=None):
    """train.py's main block (``init``: the harness's hook on the built model), without the
    plots. Returns (the closure's losses, each step's test loss, the last prediction)."""
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # load data and make training set
    data = torch.load(path, weights_only=False)
    input = torch.from_numpy(data[3:, :-1])  # noqa: A001
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    # build the model
    seq = Sequence()
    seq.double()
    if init is not None:
        init(seq)
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    losses, test_losses = [], []
    # begin to train
    for i in range(opt.steps):
        print('STEP: ', i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item())
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = opt.future
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            test_losses.append(loss.item())
            y = pred.detach().numpy()
    return losses, test_losses, y


# =========================================================================== the harness
def _same_weights(model, seed=0):
    """Every parameter from one NumPy stream, in state-dict order (equal in both libraries),
    so PyTorch and gradtrace start from the same model."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.tensor(rng.uniform(-0.1, 0.1, tuple(p.shape))))


def _same_weights_no_dropout(model):
    """As :func:`_same_weights`, with every dropout off: TransformerModel passes no dropout
    to nn.Transformer, whose layers keep its default 0.1, and the two libraries' masks are
    different random draws."""
    _same_weights(model)
    if hasattr(model, "pos_encoder"):
        # The positional table is computed in float32 (``dtype=torch.float``), where the two
        # libraries' sin and cos differ in the last bit: the same table for both, in float64.
        pe = model.pos_encoder.pe
        position = np.arange(pe.shape[0])[:, None]
        div_term = np.exp(np.arange(0, pe.shape[2], 2) * (-math.log(10000.0) / pe.shape[2]))
        table = np.zeros((pe.shape[0], pe.shape[2]))
        table[:, 0::2], table[:, 1::2] = np.sin(position * div_term), np.cos(position * div_term)
        with torch.no_grad():
            pe.copy_(torch.tensor(table[:, None, :]))
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0


def _write_corpus(path, seed=0):
    """A small corpus: 40 words, sentences from a few repeating patterns plus noise words."""
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(40)]
    for split, lines in (("train", 60), ("valid", 12), ("test", 12)):
        with open(os.path.join(path, f"{split}.txt"), "w", encoding="utf8") as f:
            for _ in range(lines):
                start = int(rng.integers(0, 30))
                sentence = words[start:start + int(rng.integers(3, 9))]
                at = int(rng.integers(0, len(sentence)))
                sentence.insert(at, words[int(rng.integers(0, 40))])
                f.write(" ".join(sentence) + "\n")


def word_language_model_args(tmp_path, model):
    return SimpleNamespace(data=str(tmp_path), model=model, emsize=16, nhid=16, nlayers=2,
                           lr=5, clip=0.25, epochs=2, batch_size=4, bptt=12, dropout=0.0,
                           tied=model != 'Transformer', nhead=2, log_interval=4,
                           save=os.path.join(str(tmp_path), f"model_{model}.pt"))


# PyTorch 2.13 on this file (imports switched to torch), torch.set_default_dtype(float64):
# (first training loss, last training loss, validation losses, test loss).
WORD_LM_TORCH = {
    "LSTM": (3.720700812404298, 3.5384000187132685, [3.5434482583011877, 3.5270608001258275],
             3.4355897406545166),
    "GRU": (3.723796820675862, 3.538951570656971, [3.542759566017346, 3.5323928660542796],
            3.436327960489611),
    "RNN_TANH": (3.692864007634524, 3.53790001340876, [3.555519819541627, 3.5467400132868385],
                 3.4537626560449985),
    # Its second validation loss is worse: the learning rate is annealed (lr /= 4).
    "Transformer": (3.7041684631293363, 3.5411646795414478,
                    [3.5485822376105647, 3.570555784888918], 3.4595635857333185),
}
# (first loss, last loss, each step's test loss): 40 closure calls over two LBFGS steps.
TIME_SEQUENCE_TORCH = (0.4937682309084698, 0.0019314911735675943,
                       [0.00612627267133419, 0.000876758670378014])


@pytest.fixture
def float64_default():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


@pytest.mark.parametrize("model", ["LSTM", "GRU", "RNN_TANH", "Transformer"])
def test_word_language_model_trains_as_pytorchs(tmp_path, float64_default, model):
    _write_corpus(str(tmp_path))
    losses, val_losses, test_loss = word_language_model_main(
        word_language_model_args(tmp_path, model), init=_same_weights_no_dropout)
    first, last, val, test = WORD_LM_TORCH[model]
    assert losses[0] == pytest.approx(first, rel=1e-12)
    assert losses[-1] == pytest.approx(last, rel=1e-9)
    assert val_losses == pytest.approx(val, rel=1e-9)
    assert test_loss == pytest.approx(test, rel=1e-9)
    assert val_losses[-1] < losses[0]   # it learns


def test_time_sequence_prediction_with_lbfgs_as_pytorchs(tmp_path):
    path = str(tmp_path / "traindata.pt")
    generate_sine_wave(path, L=60, N=12)
    opt = SimpleNamespace(steps=2, future=30)
    losses, test_losses, y = time_sequence_prediction_main(opt, path, init=_same_weights)
    first, last, tests = TIME_SEQUENCE_TORCH
    assert losses[0] == pytest.approx(first, rel=1e-12)
    assert losses[-1] == pytest.approx(last, rel=1e-8)
    assert test_losses == pytest.approx(tests, rel=1e-8)
    assert losses[-1] < losses[0] / 2 and y.shape == (3, 59 + 30)
