"""The VLM training notebook runs top to bottom, and the facts its prose relies on hold: what each training stage
runs per module, how much of a padded batch is padding and that a packed one has none, MFU against HFU with
activation checkpointing, and the projection's real tokens per second. How the notebooks are executed:
tests/_notebooks.py.

Every expected figure is arithmetic from the notebook's model sizes, written out below (conventions in
docs/concepts.md: a product is 2 x M x N x K FLOPs; attention 2 x (d_q + d_v) per (query, key) pair forward and
2 x (3 d_q + 2 d_v) backward, the fused kernel recomputing the scores, per query head)."""

import pytest

pytest.importorskip("transformers")

from _notebooks import EXECUTED_BY, check_runs_without_touching_the_repository  # noqa: E402
from _notebooks import executed, kernel_env  # noqa: E402, F401  (the fixtures)

# notebooks/vlm_train.ipynb's sizes
IMAGES, PATCHES, PATCH_DIM = 4, 16, 3 * 4 * 4  # one image per sample: 4 x 4 patches of 3 x 4 x 4 pixels
DV, FV, V_LAYERS, V_HEADS = 32, 64, 2, 2  # SigLIP-2 tower: width, MLP width, layers, heads
H, F, LAYERS, HEADS, KV_HEADS, VOCAB = 64, 128, 2, 4, 2, 256  # Qwen2 LM
TEXT = [8, 24, 40, 16]  # text tokens after each sample's image tokens
LENGTHS = [PATCHES + t for t in TEXT]  # [24, 40, 56, 32]
B, S, REAL = len(LENGTHS), max(LENGTHS), sum(LENGTHS)  # padded (4, 56): 224 positions, 152 real tokens

PADDED, STAGE1 = "stage 2, padded", "stage 1, padded"
PACKED, BF16, CKPT = "stage 2, packed", "stage 2, packed, bf16", "stage 2, packed, bf16, checkpointing"


def mm(rows, k, n):
    return 2 * rows * k * n


def attention(pairs, head_dim, backward=False):
    """Matrix FLOPs of a fused attention kernel over ``pairs`` (query, key) pairs summed over query heads."""
    return 2 * (5 if backward else 2) * head_dim * pairs


# the tower: 64 patch tokens (4 images x 16); no padding in the images
V_TOKENS, V_HEAD_DIM = IMAGES * PATCHES, DV // V_HEADS
V_LAYER_WEIGHTS = 4 * DV * DV + 2 * DV * FV  # q, k, v, o; fc1, fc2
V_LINEAR = mm(V_TOKENS, PATCH_DIM, DV) + V_LAYERS * 2 * V_TOKENS * V_LAYER_WEIGHTS
V_RESIZE = mm(V_TOKENS, PATCHES, DV)  # the position-embedding grid interpolated per image: weights x grid
V_PAIRS = V_LAYERS * IMAGES * V_HEADS * PATCHES * PATCHES
TOWER_FORWARD = V_LINEAR + V_RESIZE + attention(V_PAIRS, V_HEAD_DIM)
# weight gradients of every linear layer, input gradients of all but the patch embedding (pixels need none), the
# attention backward, and the position grid's gradient (the interpolation weights transposed, times the gradient)
TOWER_BACKWARD = (V_LINEAR + V_LAYERS * 2 * V_TOKENS * V_LAYER_WEIGHTS + attention(V_PAIRS, V_HEAD_DIM, True)
                  + V_RESIZE)

# the projector: 32 -> 64 -> 64 over the 64 patch tokens
PROJECTOR_FORWARD = mm(V_TOKENS, DV, H) + mm(V_TOKENS, H, H)
PROJECTOR_BACKWARD_STAGE1 = PROJECTOR_FORWARD + mm(V_TOKENS, H, H)  # weight gradients + the 2nd layer's input one
PROJECTOR_BACKWARD_STAGE2 = PROJECTOR_BACKWARD_STAGE1 + mm(V_TOKENS, H, DV)  # + the 1st layer's: the tower trains

# the LM, per position: q, k, v, o, gate, up, down per layer, and the LM head
HEAD_DIM = H // HEADS
LM_LAYER_WEIGHTS = 2 * H * H + 2 * H * KV_HEADS * HEAD_DIM + 3 * H * F
LM_WEIGHTS = LAYERS * LM_LAYER_WEIGHTS + H * VOCAB


def lm_positions(packed):
    return REAL if packed else B * S


def lm_pairs(packed):
    """Score pairs per layer, over all query heads: the CPU's dense kernel with a mask computes every pair of each
    row: 4 x 56^2 padded, 152^2 for the packed row (its block-diagonal mask does not skip the others)."""
    return HEADS * (REAL * REAL if packed else B * S * S)


def lm_forward(packed):
    return 2 * lm_positions(packed) * LM_WEIGHTS + LAYERS * attention(lm_pairs(packed), HEAD_DIM)


def lm_backward(packed, stage):
    # input gradients in both stages (the projector's gradient flows through the frozen LM), weight gradients in 2
    products = 2 * lm_positions(packed) * LM_WEIGHTS * (2 if stage == 2 else 1)
    return products + LAYERS * attention(lm_pairs(packed), HEAD_DIM, True)


def config(c, name):
    return c["configs"][name]


def matrix(cfg, phase, module):
    return cfg["modules"][phase][module]["matrix_flops"]


@pytest.mark.parametrize("name", EXECUTED_BY["test_notebooks_vlm"])
def test_notebook_runs_without_touching_the_repository(name, executed):
    check_runs_without_touching_the_repository(name, executed)


def test_every_configuration_is_counted_in_full(executed):
    _, c, _ = executed("vlm_train")
    assert c["lengths"] == LENGTHS and c["image_tokens"] == PATCHES
    assert list(c["configs"]) == [STAGE1, PADDED, PACKED, BF16, CKPT]
    for cfg in c["configs"].values():
        assert cfg["unknown_ops"] == {} and cfg["errors"] == 0
        assert cfg["real_tokens"] == REAL  # the sum of the sample lengths, padded or packed


def test_stage_one_runs_no_tower_backward_and_no_weight_gradient_outside_the_projector(executed):
    _, c, _ = executed("vlm_train")
    s1, s2 = config(c, STAGE1), config(c, PADDED)
    projector = DV * H + H + H * H + H
    assert s1["trained_params"] == projector
    # patch embedding, position grid, per layer (q, k, v, o, fc1, fc2 with biases; two layer norms), final norm
    tower = (PATCH_DIM * DV + DV + PATCHES * DV + V_LAYERS * (4 * (DV * DV + DV) + 2 * DV * FV + FV + DV + 4 * DV)
             + 2 * DV)
    # embedding, per layer (q, k, v with biases, o, gate, up, down; two RMS norms), final norm, LM head
    lm = VOCAB * H + LAYERS * (2 * H * H + 2 * H * KV_HEADS * HEAD_DIM + H + 2 * KV_HEADS * HEAD_DIM + 3 * H * F
                               + 2 * H) + H + H * VOCAB
    assert s2["trained_params"] == tower + projector + lm
    for cfg in (s1, s2):  # freezing changes nothing before the loss
        assert matrix(cfg, "forward", "vision_tower") == TOWER_FORWARD
        assert matrix(cfg, "forward", "projector") == PROJECTOR_FORWARD
        assert matrix(cfg, "forward", "language_model") == lm_forward(packed=False)
    # the tower is frozen and reads pixels: no backward work of any kind in stage 1
    assert s1["modules"]["backward"]["vision_tower"] == {"matrix_flops": 0, "flops": 0}
    assert matrix(s2, "backward", "vision_tower") == TOWER_BACKWARD
    assert matrix(s1, "backward", "projector") == PROJECTOR_BACKWARD_STAGE1
    assert matrix(s2, "backward", "projector") == PROJECTOR_BACKWARD_STAGE2
    assert matrix(s1, "backward", "language_model") == lm_backward(packed=False, stage=1)
    assert matrix(s2, "backward", "language_model") == lm_backward(packed=False, stage=2)
    # the difference in the LM is exactly its weight gradients: its forward linear-layer work
    assert (matrix(s2, "backward", "language_model") - matrix(s1, "backward", "language_model")
            == 2 * B * S * LM_WEIGHTS)
    assert s1["by_phase"]["backward"]["matrix_flops"] == (lm_backward(False, 1) + PROJECTOR_BACKWARD_STAGE1)


def test_padding_share_of_a_padded_batch_and_none_in_a_packed_one(executed):
    _, c, _ = executed("vlm_train")
    padded, packed = config(c, PADDED), config(c, PACKED)
    assert padded["positions"] == B * S == 224 and packed["positions"] == REAL
    # per-token work (the linear layers): the padded positions' share of all positions
    assert padded["token_padding_share"] == pytest.approx((B * S - REAL) / (B * S), rel=1e-12)
    assert 0 < padded["padding_share"] < 1
    for name in (PACKED, BF16, CKPT):
        assert config(c, name)["padding_share"] == 0.0 and config(c, name)["token_padding_share"] == 0.0
    assert matrix(packed, "forward", "language_model") == lm_forward(packed=True)
    assert matrix(packed, "backward", "language_model") == lm_backward(packed=True, stage=2)
    # the images are the same in both layouts
    for module, fwd in (("vision_tower", TOWER_FORWARD), ("projector", PROJECTOR_FORWARD)):
        assert matrix(packed, "forward", module) == matrix(padded, "forward", module) == fwd


def test_mfu_counts_the_model_once_and_hfu_the_recomputation(executed):
    _, c, _ = executed("vlm_train")
    for name in (STAGE1, PADDED, PACKED, BF16):  # no recomputation: MFU and HFU are the same figure
        cfg = config(c, name)
        assert cfg["recompute_flops"] == 0 and cfg["model_flops"] == cfg["flops"]
        assert cfg["mfu"] == cfg["hfu"] > 0 and cfg["projected_mfu"] == cfg["projected_hfu"] > 0
    ck, bf = config(c, CKPT), config(c, BF16)
    # the decoder layers' forward again, but each MLP's down projection: non-reentrant checkpointing stops
    # recomputing once it has every tensor the backward needs
    recomputed = 2 * REAL * LAYERS * (LM_LAYER_WEIGHTS - F * H) + LAYERS * attention(lm_pairs(True), HEAD_DIM)
    assert ck["by_phase"]["recompute"]["matrix_flops"] == recomputed
    assert matrix(ck, "recompute", "language_model") == recomputed
    assert matrix(ck, "recompute", "vision_tower") == matrix(ck, "recompute", "projector") == 0
    assert ck["recompute_flops"] == ck["by_phase"]["recompute"]["flops"] == ck["flops"] - ck["model_flops"] > 0
    assert ck["model_flops"] == bf["flops"]  # the model's work is what ran without checkpointing
    assert ck["hfu"] > ck["mfu"] > 0
    # projected, every op is judged against the one FP32 peak of the target's datasheet entry (the prose says
    # so): HFU / MFU is then exactly the executed FLOPs over the model's
    assert ck["projected_distinct_peaks"] == 1
    assert ck["projected_hfu"] / ck["projected_mfu"] == pytest.approx(ck["flops"] / ck["model_flops"], rel=1e-9)


def test_projected_real_tokens_per_second(executed):
    _, c, _ = executed("vlm_train")
    assert c["target"] == "RTX PRO 6000 Blackwell"
    for cfg in c["configs"].values():
        assert cfg["projected_flops"] == cfg["flops"] and cfg["projected_time"] > 0
        assert cfg["projected_real_tokens_per_s"] == pytest.approx(REAL / cfg["projected_time"], rel=1e-12)
    # a subset of the work takes less time at the roof; recomputation adds time
    assert config(c, STAGE1)["projected_time"] < config(c, PADDED)["projected_time"]
    assert config(c, CKPT)["projected_time"] > config(c, BF16)["projected_time"]
    # measured on this CPU: figures that depend on the machine's load, not asserted beyond being there
    assert all(cfg["wall_time"] > 0 and cfg["real_tokens_per_s"] > 0 for cfg in c["configs"].values())
