"""Real model shapes compiled under measure (CPU, Inductor's C++ backend): torchvision's ResNet-18 and GPT-2 small
with 2 layers (transformers), a training step and inference each (one of the four in the suite, all four in
bench/breadth.sh). The aten-level counts equal the eager step's (matrix
FLOPs from roofline's eager count, per-module FLOPs from FlopCounterMode), every generated kernel is listed with
its fused ops, and its bytes equal a second account taken while the kernel runs (tests/test_compiled.py's spy).

Compiling these takes tens of seconds each; every model is compiled once per mode and shared by the tests."""

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch._inductor")

import roofline  # noqa: E402
from roofline._compiled import _hooks  # noqa: E402

if _hooks._torch_version() < _hooks.MIN_TORCH:
    pytest.skip("the compiled view needs a newer torch", allow_module_level=True)

from test_compiled import _compat, _eager_counts, _KernelSpy  # noqa: E402


def _resnet18():
    # 16 x 128 x 128: at 2 x 32 x 32 (or 8 x 128 x 128 in inference) the activations are so small that the
    # convolution weights Inductor copies to the channels-last layout on every forward call (about 90 MB read and
    # written) outweigh what fusion saves
    tv = pytest.importorskip("torchvision")
    return tv.models.resnet18(num_classes=10), torch.randn(16, 3, 128, 128), lambda m, x: m(x).sum()


def _gpt2():
    tr = pytest.importorskip("transformers")
    # GPT-2 small (768 wide, 12 heads, its 50,257-token vocabulary) with 2 of its 12 layers, 2 sequences of 16 tokens
    cfg = tr.GPT2Config(n_layer=2, attn_implementation="sdpa")
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    return tr.GPT2LMHeadModel(cfg), ids, lambda m, x: m(x, labels=x).loss


MODELS = {"resnet18": _resnet18, "gpt2": _gpt2}


def _step(model, x, loss, train):
    if train:
        loss(model, x).backward()
    else:
        with torch.no_grad():
            loss(model, x)


# the suite compiles ResNet-18 for inference (compiled training steps of smaller models: tests/test_compiled.py); the
# other three are breadth (bench/breadth.sh): the same checks, tens of seconds of compilation each
SAMPLE = {("resnet18", "infer")}


@pytest.fixture(scope="module", params=[pytest.param((m, t), marks=() if (m, t) in SAMPLE else pytest.mark.breadth)
                                        for m in MODELS for t in ("train", "infer")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def run(request):
    name, mode = request.param
    train = mode == "train"
    torch.manual_seed(0)
    model, x, loss = MODELS[name]()
    model.train(train)
    fcm = _eager_counts(model, lambda m: _step(m, x, loss, train))
    with roofline.measure(model, timing=None) as eager:
        _step(model, x, loss, train)
    model.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    cmodel = torch.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's note on global module hooks and torch.compile
        with roofline.measure(cmodel, timing="op", ceilings="datasheet") as first:  # compiles
            _step(cmodel, x, loss, train)
        with _KernelSpy() as spy, roofline.measure(cmodel, timing="op", ceilings="datasheet") as second:
            _step(cmodel, x, loss, train)
    return dict(name=name, train=train, fcm=fcm, eager=eager, first=first, second=second, spy=spy)


def test_compiled_counts_equal_eager(run):
    eager = run["eager"]
    assert eager.compiled is None or not eager.compiled.get("graph_calls")
    for r in (run["first"], run["second"]):
        c = r.compiled
        assert c["eager_fallback"] is None and c["uncounted_graph_calls"] == 0 and c["graph_calls"] >= 1
        assert r.matrix_flops == eager.matrix_flops > 0
        for phase in ("forward", "backward"):
            assert r.by_phase().get(phase, {}).get("matrix_flops", 0) == \
                eager.by_phase().get(phase, {}).get("matrix_flops", 0), phase
    got, want = _compat(run["first"]), run["fcm"]
    assert got["Global"] == want["Global"]  # every op, FlopCounterMode's count
    differ = sorted(m for m in set(got) | set(want) if got.get(m) != want.get(m))
    # every module, the residual blocks' downsamples included: FlopCounterMode's module tracker keeps a module active
    # in backward from its outputs' gradients until its inputs' are complete, so a downsample (sharing its input with
    # the main branch) is also credited with the main branch's backward; the compiled view replays that rule
    assert differ == []


def test_every_kernel_listed_with_ops_bytes_and_time(run):
    r, spy = run["second"], run["spy"]
    kernels = r.kernels
    assert kernels and all(k["bytes_known"] for k in kernels)
    generated = [k for k in kernels if not k["extern"]]
    assert generated
    for k in generated:
        if not k["ops"]:
            # a kernel Inductor added without an op of the graph behind it: with channels-last convolutions, the
            # conversion of the conv weights to that layout (on CPU, once per forward call). Its traffic is real
            # and listed: it copies each input to an output of the same size.
            assert run["name"] == "resnet18" and k["origins"] == [] and k["phase"] == "forward", k["name"]
            assert sorted(k["inputs"].values()) == sorted(k["outputs"].values()), k["name"]
    untimed = [(k["name"], k["extern"], k["time"]) for k in kernels if not (k["time"] is not None and k["time"] > 0)]
    assert untimed == []
    # a second account: the bytes of the tensors each generated kernel was called with
    for name, (mine, seen) in spy.generated(kernels).items():
        assert mine == seen, name
    # every call of a generated kernel is one of its call sites (Inductor calls one kernel for identical groups)
    assert sum(len(v) for n, v in spy.kernels.items() if not isinstance(n, tuple)) == \
        sum(k["calls"] for k in generated)
    ext = sorted(k["bytes"] for k in kernels if k["extern"])
    seen = sorted(b for key, v in spy.kernels.items() if isinstance(key, tuple) for b in v)
    assert ext == seen
    # fusion happened: the kernels move fewer bytes than the same ops one by one, and the total is the sum of the
    # kernels' buffers; kernels Inductor added without an op behind them are reported apart
    f = r.fusion
    assert f["compiled_bytes"] == sum(k["bytes"] * k["calls"] for k in kernels)
    assert f["added_bytes"] == sum(k["bytes"] * k["calls"] for k in kernels if not k["ops"])
    eager_bytes = run["eager"].bytes_read + run["eager"].bytes_written
    assert 0 < f["compiled_bytes"] < eager_bytes
    assert f["added_bytes"] < f["compiled_bytes"]



def test_kernels_read_the_rows_and_slices_they_index(run):
    """A generated kernel can be handed more than it reads: an embedding lookup fused into a kernel is handed the
    whole table and reads the rows of its tokens; a kernel that splits attention's fused q/k/v projection is handed the
    projection and reads its part. Each input's bytes are at most the buffer handed; where they are less, the test's
    arithmetic says how much: GPT-2 small's token table, one 768-wide float32 row per token (2 x 16 tokens); its
    position table, a row per position (16) or per token (the lookup repeated for each sequence); a third or two
    thirds of the (32, 2304) projection; otherwise only small index buffers (dropout seeds, shifted labels)."""
    r, name = run["second"], run["name"]
    width, tokens, seq = 768, 32, 16
    row = width * 4
    short = []
    for k in r.kernels:
        if k["extern"]:
            continue
        for b, read in k["inputs"].items():
            handed = k["input_buffers"][b]
            assert read <= handed, (k["name"], b)
            if read < handed:
                short.append((k["name"], handed, read))
    if name == "resnet18":
        assert short == []  # convolutions and batch norms read whole tensors
        return
    table, positions, qkv = 50257 * row, 1024 * row, tokens * 3 * row
    allowed = {table: {tokens * row}, positions: {seq * row, tokens * row}, qkv: {tokens * row, 2 * tokens * row}}
    for kname, handed, read in short:
        if handed in allowed:
            assert read in allowed[handed], (kname, handed, read)
        else:
            assert handed < 1024, (kname, handed, read)
    # the lookups of the token table: every kernel that embeds the tokens reads their rows, not the 154 MB table
    assert any(h == table for _, h, _ in short)
