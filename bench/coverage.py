"""Model-zoo coverage sweep: does roofline count every op of the models people run?

For every model of the zoo (torchvision classification, a sample of its detection / segmentation / video models, timm
architectures across families, transformers architectures and vision-language models built from small configs) it
counts one inference pass and one training step (forward, backward, AdamW step) with ``roofline.measure`` and with
``FlopCounterMode``, and prints per model and mode (vision-language models add a training step with the vision tower
frozen, mode ``frozen``):

* the ops without a formula (``unknown``) and the calls whose count failed (``errors``);
* ``fcm!=``: ops where roofline's copy of FlopCounterMode's count differs from FlopCounterMode itself (should be
  empty: a difference is a bug);
* ``true!=fcm``: ops whose true count differs from FlopCounterMode's (causal attention, grouped products, ...),
  for information;
* the time to count (the measured pass alone).

Models run on the meta device (shapes only, no arithmetic) unless they cannot (data-dependent control flow: detection
models, the image-token checks of vision-language models, some transformers code paths); those run on the CPU at small
sizes. The last line is "K/N models fully covered": no unknown op and no error in any mode.

    python bench/coverage.py                       # the whole zoo, one process
    python bench/coverage.py --jobs 2              # in 2 worker processes, each under `nice -n 10`
    python bench/coverage.py --only tv,timm        # families (tv, tv-det, tv-seg, tv-video, timm, hf, vlm, speech,
                                                   # detection, sparse, qat, rnn, torchao)
    python bench/coverage.py --only resnet18,hf/mixtral --json out.json
    python bench/coverage.py --list                # the zoo's model names

The optional `torchao` family (quantized inference) is listed only when torchao is installed, and runs inference only.

Timings are wall-clock seconds on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# ---- the zoo --------------------------------------------------------------------------------------------------------

TV_DET = ["fasterrcnn_mobilenet_v3_large_320_fpn", "retinanet_resnet50_fpn", "ssdlite320_mobilenet_v3_large",
          "maskrcnn_resnet50_fpn", "fcos_resnet50_fpn"]
TV_SEG = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
TV_VIDEO = ["r3d_18", "r2plus1d_18", "s3d", "mvit_v2_s", "swin3d_t"]

TIMM = """resnet18 resnet50d resnext50_32x4d seresnet50 regnety_016 efficientnet_b0 efficientnetv2_rw_s
mobilenetv3_large_100 mobilenetv4_conv_small ghostnet_100 mnasnet_100 densenet121 dla34 dpn68 hrnet_w18_small
inception_v3 xception41 vgg11_bn convnext_atto convnextv2_atto vit_tiny_patch16_224 deit_tiny_patch16_224
deit3_small_patch16_224 beit_base_patch16_224 swin_tiny_patch4_window7_224 swinv2_tiny_window8_256 cait_xxs24_224
coat_lite_tiny crossvit_tiny_240 levit_128s pit_ti_224 tnt_s_patch16_224 twins_svt_small pvt_v2_b0 poolformer_s12
mixer_b16_224 resmlp_12_224 gmlp_ti16_224 convmixer_768_32 coatnet_0_rw_224 maxvit_tiny_rw_224 efficientformer_l1
efficientformerv2_s0 mobilevit_xxs mobilevitv2_050 edgenext_xx_small fastvit_t8 repvgg_a0 rexnet_100 lcnet_050
nfnet_l0 eva02_tiny_patch14_224 cspdarknet53 res2net50_26w_4s resnest14d skresnet18 hgnet_tiny ese_vovnet19b_dw
visformer_tiny xcit_nano_12_p16_224 sequencer2d_s gcvit_xxtiny davit_tiny focalnet_tiny_srf inception_next_tiny
hiera_tiny_224 nest_tiny_jx volo_d1_224 mambaout_femto efficientvit_b0 starnet_s1 repvit_m0_9
vit_relpos_small_patch16_224 halonet26t botnet26t_256""".split()

# transformers architectures: (name, model type, model class, config overrides, input kind)
_TEXT = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128)
_ENC = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=128)
HF = [
    ("llama", "llama", "AutoModelForCausalLM", dict(_TEXT), "text"),
    ("mistral-sliding-window", "mistral", "AutoModelForCausalLM", dict(_TEXT, sliding_window=8), "text"),
    ("qwen2-gqa", "qwen2", "AutoModelForCausalLM", dict(_TEXT), "text"),
    ("qwen3", "qwen3", "AutoModelForCausalLM", dict(_TEXT, head_dim=16), "text"),
    ("gemma", "gemma", "AutoModelForCausalLM", dict(_TEXT, head_dim=16), "text"),
    ("gemma2-sliding-softcap", "gemma2", "AutoModelForCausalLM", dict(_TEXT, head_dim=16, sliding_window=8), "text"),
    ("gemma3", "gemma3_text", "AutoModelForCausalLM", dict(_TEXT, head_dim=16, sliding_window=8), "text"),
    ("phi3", "phi3", "AutoModelForCausalLM", dict(_TEXT, pad_token_id=0), "text"),
    ("starcoder2", "starcoder2", "AutoModelForCausalLM", dict(_TEXT), "text"),
    ("gpt2", "gpt2", "AutoModelForCausalLM", dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=128),
     "text"),
    ("gpt-neox", "gpt_neox", "AutoModelForCausalLM", dict(_ENC), "text"),
    ("opt", "opt", "AutoModelForCausalLM", dict(vocab_size=128, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
                                                 num_attention_heads=4, max_position_embeddings=128,
                                                 word_embed_proj_dim=64), "text"),
    ("falcon", "falcon", "AutoModelForCausalLM", dict(vocab_size=128, hidden_size=64, num_hidden_layers=2,
                                                       num_attention_heads=4), "text"),
    ("bloom", "bloom", "AutoModelForCausalLM", dict(vocab_size=128, hidden_size=64, n_layer=2, n_head=4), "text"),
    ("mixtral-moe", "mixtral", "AutoModelForCausalLM", dict(_TEXT, num_local_experts=4, num_experts_per_tok=2),
     "text"),
    ("qwen2-moe", "qwen2_moe", "AutoModelForCausalLM",
     dict(_TEXT, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64),
     "text"),
    ("qwen3-moe", "qwen3_moe", "AutoModelForCausalLM",
     dict(_TEXT, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32), "text"),
    ("olmoe", "olmoe", "AutoModelForCausalLM", dict(_TEXT, num_experts=4, num_experts_per_tok=2), "text"),
    ("deepseek-v3-mla-moe", "deepseek_v3", "AutoModelForCausalLM",
     dict(_TEXT, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
          first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
          v_head_dim=16, n_group=1, topk_group=1), "text"),
    ("mamba", "mamba", "AutoModelForCausalLM", dict(vocab_size=128, hidden_size=64, state_size=8, num_hidden_layers=2),
     "text"),
    ("mamba2", "mamba2", "AutoModelForCausalLM",
     dict(vocab_size=128, hidden_size=64, state_size=8, num_hidden_layers=2, num_heads=8, head_dim=16, n_groups=1,
          expand=2, chunk_size=8), "text"),
    ("jamba-hybrid-moe", "jamba", "AutoModelForCausalLM",
     dict(_TEXT, num_experts=4, num_experts_per_tok=2, attn_layer_period=2, attn_layer_offset=1,
          expert_layer_period=2, expert_layer_offset=1, mamba_d_state=8, mamba_dt_rank=8, use_mamba_kernels=False),
     "text"),
    ("bert", "bert", "AutoModelForMaskedLM", dict(_ENC), "text"),
    ("roberta", "roberta", "AutoModelForMaskedLM", dict(_ENC, pad_token_id=1), "text"),
    ("distilbert", "distilbert", "AutoModelForMaskedLM",
     dict(vocab_size=128, dim=64, hidden_dim=128, n_layers=2, n_heads=4), "text"),
    ("electra", "electra", "AutoModelForMaskedLM", dict(_ENC, embedding_size=64), "text"),
    ("deberta-v2", "deberta-v2", "AutoModelForMaskedLM", dict(_ENC), "text"),
    ("modernbert", "modernbert", "AutoModelForMaskedLM",
     dict(_ENC, global_attn_every_n_layers=2, local_attention=8, pad_token_id=0, eos_token_id=1, bos_token_id=2,
          cls_token_id=1, sep_token_id=2),
     "text"),
    ("t5", "t5", "AutoModelForSeq2SeqLM", dict(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                                num_heads=4, decoder_start_token_id=0), "seq2seq"),
    ("bart", "bart", "AutoModelForSeq2SeqLM", dict(vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2,
                                                    encoder_attention_heads=4, decoder_attention_heads=4,
                                                    encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                    max_position_embeddings=128), "seq2seq"),
    ("whisper-speech", "whisper", "AutoModelForSpeechSeq2Seq",
     dict(vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
          decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
          max_source_positions=32, max_target_positions=64, decoder_start_token_id=1, pad_token_id=0), "speech"),
    ("wav2vec2-speech", "wav2vec2", "AutoModel", dict(_ENC, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                                                       num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
     "audio"),
    ("vit", "vit", "AutoModelForImageClassification", dict(_ENC, image_size=32, patch_size=8, num_labels=10),
     "image"),
    ("clip-vision-language", "clip", "AutoModel", None, "clip"),
    ("siglip-vision-language", "siglip", "AutoModel", None, "clip"),
]


# torchao-quantized inference (optional family, inference only: the weights are quantized tensors): an MLP per
# CPU-usable config, and a small decoder LLM with int8 dynamic quantization. name -> (config class, model).
TORCHAO = {
    "mlp-int8-weight-only": ("Int8WeightOnlyConfig", "mlp"),
    "mlp-int8-dynamic": ("Int8DynamicActivationInt8WeightConfig", "mlp"),
    "mlp-intx-weight-only": ("IntxWeightOnlyConfig", "mlp"),
    "mlp-int8-dynamic-intx": ("Int8DynamicActivationIntxWeightConfig", "mlp"),
    "mlp-float8-weight-only": ("Float8WeightOnlyConfig", "mlp"),
    "llama-int8-dynamic": ("Int8DynamicActivationInt8WeightConfig", "llama"),
    "llama-int8-weight-only": ("Int8WeightOnlyConfig", "llama"),
}
_INFER_ONLY = {"torchao"}


# Vision-language models (transformers, tiny configs, random weights, nothing downloaded). Each is counted in three
# passes: inference, a training step with the vision tower frozen (requires_grad False on it: the projector and the
# language model train) and a full fine-tune. Inputs carry image tokens and pixel values sized to the config. They run
# on the CPU: the image-token checks, the M-RoPE position ids and the patch position ids need values.
# name -> builder.
_VLM_MODES = ("infer", "frozen", "train")
_VLM_IMAGE = 150  # the image token id of every tiny config (vocabulary 160; other special tokens 151-155)
_VLM_TEXT = dict(vocab_size=160, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=256)
# vision towers: 32 x 32 images in 8 x 8 patches (16 patches)
_VLM_SIGLIP = dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=4, image_size=32, patch_size=8)
_VLM_CLIP = dict(_VLM_SIGLIP, model_type="clip_vision_model", projection_dim=32)
_VLM_SMALL_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         image_size=32, patch_size=8)
# Qwen-VL style: a 4 x 4 grid of 8 x 8 patches over 2 frames, merged 2 x 2: 4 image tokens per image; M-RoPE sections
# of a 16-wide head (8 rotary pairs)
_VLM_MROPE = dict(rope_type="default", mrope_section=[2, 3, 3], rope_theta=10000.0)
_VLM_GRID = dict(depth=2, num_heads=4, patch_size=8, spatial_merge_size=2, temporal_patch_size=2)
# Models not in the family, and why (printed when the family runs).
VLM_SKIPPED = {
    "llama4": "transformers 5.24: Llama4ForConditionalGeneration.forward reads `outputs.image_outputs`, which its "
              "language model's output lacks (AttributeError with any image input)",
    "glm4v": "no tiny configuration of it is built here yet (its vision tower interpolates position embeddings with "
             "grid_sampler_2d, which has a formula now: python bench/opinfo.py --only nn.functional.grid_sample)",
}


def _vlm_ids(tokens, images=1, text=4):
    """Token ids of 2 sequences: per image `text` random tokens then `tokens` image tokens, then `text` more."""
    import torch

    row = []
    for _ in range(images):
        row += torch.randint(3, 140, (text,)).tolist() + [_VLM_IMAGE] * tokens
    return [row + torch.randint(3, 140, (text,)).tolist() for _ in range(2)]


def _vlm_image_tokens(model, **pixels):
    """Image tokens per image, for models whose count depends on tiling or pooling: the features the model makes of
    the 2 images (one per sequence), over the text width (64) and the 2 images."""
    import torch

    with torch.no_grad():
        f = getattr(model, "model", model).get_image_features(**pixels)
    f = getattr(f, "pooler_output", f)
    n = f.numel() if isinstance(f, torch.Tensor) else sum(x.numel() for x in f)
    return n // (64 * 2)


def _vlm_qwen(cls_name, text=None, vision=None):
    """The Qwen-VL models: flattened patches with their (t, h, w) grid, M-RoPE over 3 axes (mm_token_type_ids marks
    the image tokens)."""
    import torch
    import transformers

    cfg = getattr(transformers, cls_name + "Config")(
        text_config=dict(_VLM_TEXT, rope_parameters=_VLM_MROPE, **(text or {})), vision_config=vision,
        image_token_id=_VLM_IMAGE, vision_start_token_id=151, vision_end_token_id=152, video_token_id=153)
    model = getattr(transformers, cls_name + "ForConditionalGeneration")(cfg)
    ids = torch.tensor([[5, 6, 151] + [_VLM_IMAGE] * 4 + [152, 7, 8, 9, 10]] * 2)
    return model, ids, dict(pixel_values=torch.randn(2 * 16, 3 * 2 * 8 * 8),
                            image_grid_thw=torch.tensor([[1, 4, 4]] * 2), mm_token_type_ids=(ids == _VLM_IMAGE).int())


def _vlm_simple(cls, tokens=None, text="llama", text_extra=None, pixels=None, token_key="image_token_index",
                **cfg_kw):
    """A model built as `cls`Config(vision_config, text_config, image token id under `token_key`) whose image tokens
    per image are `tokens` (None: counted from the model's features); one 32 x 32 image per sequence unless
    `pixels` says otherwise."""
    import torch
    import transformers

    cfg_kw.setdefault("vision_config", _VLM_SIGLIP)
    cfg_kw[token_key] = _VLM_IMAGE
    cfg = getattr(transformers, cls + "Config")(text_config=dict(_VLM_TEXT, model_type=text, **(text_extra or {})),
                                                **cfg_kw)
    model = getattr(transformers, cls + "ForConditionalGeneration")(cfg)
    pixels = pixels if pixels is not None else dict(pixel_values=torch.randn(2, 3, 32, 32))
    n = tokens if tokens is not None else _vlm_image_tokens(model, **pixels)
    return model, torch.tensor(_vlm_ids(n)), pixels


def _vlm_llava():  # LLaVA with a SigLIP tower (all 16 patch features) and a Qwen2 language model
    return _vlm_simple("Llava", 16, "qwen2", vision_feature_select_strategy="full", vision_feature_layer=-1)


def _vlm_llava_next():  # any-resolution tiling: a 32 x 64 image as the base view and 2 tiles, newline tokens
    import torch

    pixels = dict(pixel_values=torch.randn(2, 3, 3, 32, 32), image_sizes=torch.tensor([[32, 64]] * 2))
    return _vlm_simple("LlavaNext", None, "llama", pixels=pixels, vision_config=_VLM_CLIP, vision_feature_layer=-1,
                       image_grid_pinpoints=[[32, 32], [32, 64], [64, 32]])


def _vlm_llava_onevision():
    import torch

    pixels = dict(pixel_values=torch.randn(2, 3, 3, 32, 32), image_sizes=torch.tensor([[32, 64]] * 2))
    return _vlm_simple("LlavaOnevision", None, "qwen2", pixels=pixels, video_token_index=151,
                       image_grid_pinpoints=[[32, 32], [32, 64], [64, 32]])


def _vlm_paligemma():  # 16 image tokens as the prefix; token_type_ids mark the suffix trained on
    import torch

    model, _, pixels = _vlm_simple("PaliGemma", 16, "gemma", dict(head_dim=16),
                                   vision_config=dict(_VLM_SIGLIP, projection_dim=64), projection_dim=64)
    ids = torch.tensor(_vlm_ids(16, text=0))
    types = torch.zeros_like(ids)
    types[:, -2:] = 1
    return model, ids, dict(pixels, token_type_ids=types)


def _vlm_gemma3():  # 16 patches pooled to 4 tokens per image; bidirectional attention over them (token_type_ids)
    model, ids, pixels = _vlm_simple("Gemma3", 4, "gemma3_text", dict(head_dim=16, sliding_window=8),
                                     boi_token_index=151, eoi_token_index=152, mm_tokens_per_image=4)
    return model, ids, dict(pixels, token_type_ids=(ids == _VLM_IMAGE).long())


def _vlm_mistral3():  # a Pixtral tower (2-D RoPE over the patch grid), patches merged 2 x 2
    import torch

    pixels = dict(pixel_values=torch.randn(2, 3, 32, 32), image_sizes=torch.tensor([[32, 32]] * 2))
    return _vlm_simple("Mistral3", None, "mistral", pixels=pixels, spatial_merge_size=2,
                       vision_config=dict(_VLM_SMALL_VISION, model_type="pixtral", head_dim=8))


def _vlm_got_ocr2():  # a SAM-style tower: windowed and global attention with relative positions, 64 x 64 images
    import torch

    vision = dict(hidden_size=32, output_channels=64, num_hidden_layers=2, num_attention_heads=4, image_size=64,
                  patch_size=8, window_size=4, global_attn_indexes=[1], mlp_dim=64)
    return _vlm_simple("GotOcr2", None, "qwen2", pixels=dict(pixel_values=torch.randn(2, 3, 64, 64)),
                       vision_config=vision)


def _vlm_idefics(cls, images=2, **cfg_kw):
    """Idefics2/3 and SmolVLM: `images` images per sequence with their pixel masks (patch position ids by
    bucketize)."""
    import torch
    import transformers

    cfg = getattr(transformers, cls + "Config")(vision_config=_VLM_SMALL_VISION, image_token_id=_VLM_IMAGE,
                                                text_config=dict(_VLM_TEXT, model_type="llama"), **cfg_kw)
    model = getattr(transformers, cls + "ForConditionalGeneration")(cfg)
    ids = torch.tensor(_vlm_ids(4, images=images))  # 16 patches, pixel shuffle 2 (or 4 perceiver latents): 4 tokens
    return model, ids, dict(pixel_values=torch.randn(2, images, 3, 32, 32),
                            pixel_attention_mask=torch.ones(2, images, 32, 32, dtype=torch.bool))


def _vlm_mllama():  # cross-attention to 2 tiles of one image; no image features merged into the text
    import torch
    import transformers

    vision = dict(_VLM_SMALL_VISION, attention_heads=4, num_global_layers=1, vision_output_dim=64, max_num_tiles=2,
                  intermediate_layers_indices=[0], supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]])
    vision.pop("num_attention_heads")
    text = dict(_VLM_TEXT, num_hidden_layers=3, cross_attention_layers=[1], bos_token_id=1, eos_token_id=2,
                pad_token_id=0)
    model = transformers.MllamaForConditionalGeneration(
        transformers.MllamaConfig(vision_config=vision, text_config=text, image_token_index=_VLM_IMAGE))
    ids = torch.tensor(_vlm_ids(1))
    return model, ids, dict(pixel_values=torch.randn(2, 1, 2, 3, 32, 32), aspect_ratio_ids=torch.tensor([[2]] * 2),
                            aspect_ratio_mask=torch.ones(2, 1, 2, dtype=torch.long),
                            cross_attention_mask=torch.ones(2, ids.shape[1], 1, 2, dtype=torch.long))


def _vlm_lfm2():  # a SigLIP2 tower on flattened patches with their grid; a hybrid convolution/attention LM
    import torch
    import transformers

    vision = dict(_VLM_SMALL_VISION, model_type="siglip2_vision_model", num_patches=16)
    vision.pop("image_size")
    text = dict(_VLM_TEXT, model_type="lfm2", layer_types=["conv", "full_attention"])
    model = transformers.Lfm2VlForConditionalGeneration(transformers.Lfm2VlConfig(
        vision_config=vision, text_config=text, image_token_id=_VLM_IMAGE, projector_hidden_size=64,
        downsample_factor=2))
    pixels = dict(pixel_values=torch.randn(2, 16, 3 * 8 * 8), spatial_shapes=torch.tensor([[4, 4]] * 2),
                  pixel_attention_mask=torch.ones(2, 16, dtype=torch.bool))
    return model, torch.tensor(_vlm_ids(_vlm_image_tokens(model, **pixels))), pixels


def _vlm_blip2():  # a Q-Former's 4 query tokens in front of an OPT language model
    import torch
    import transformers

    qformer = dict(vocab_size=160, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                   encoder_hidden_size=32, max_position_embeddings=64)
    text = dict(model_type="opt", vocab_size=160, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=128, word_embed_proj_dim=64)
    model = transformers.Blip2ForConditionalGeneration(transformers.Blip2Config(
        vision_config=_VLM_SMALL_VISION, qformer_config=qformer, text_config=text, num_query_tokens=4,
        image_token_index=_VLM_IMAGE))
    return model, torch.tensor(_vlm_ids(4, text=0)), dict(pixel_values=torch.randn(2, 3, 32, 32))


def _vlm_fuyu():  # no vision tower: 16 flattened 8 x 8 patches projected by one linear layer into a Persimmon LM
    import torch
    import transformers

    text = dict(model_type="persimmon", vocab_size=160, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=128)
    model = transformers.FuyuForCausalLM(transformers.FuyuConfig(text_config=text, image_size=32, patch_size=8,
                                                                 image_token_id=_VLM_IMAGE))
    return model, torch.tensor(_vlm_ids(16)), dict(pixel_values=torch.randn(2, 16, 3 * 8 * 8))


_COHERE2 = dict(head_dim=16, sliding_window=8)
VLM = {
    "llava-siglip-qwen2": _vlm_llava,
    "llava-next": _vlm_llava_next,
    "llava-onevision": _vlm_llava_onevision,
    "qwen2-vl": lambda: _vlm_qwen("Qwen2VL", vision=dict(_VLM_GRID, embed_dim=32, hidden_size=64)),
    "qwen2.5-vl-window": lambda: _vlm_qwen("Qwen2_5_VL", vision=dict(
        _VLM_GRID, hidden_size=32, intermediate_size=64, out_hidden_size=64, window_size=16,
        fullatt_block_indexes=[1])),
    "qwen3-vl-deepstack": lambda: _vlm_qwen("Qwen3VL", text=dict(head_dim=16), vision=dict(
        _VLM_GRID, hidden_size=32, intermediate_size=64, out_hidden_size=64, num_position_embeddings=16,
        deepstack_visual_indexes=[0])),
    "qwen3-vl-moe": lambda: _vlm_qwen("Qwen3VLMoe", text=dict(head_dim=16, num_experts=4, num_experts_per_tok=2,
                                                              moe_intermediate_size=32), vision=dict(
        _VLM_GRID, hidden_size=32, intermediate_size=64, out_hidden_size=64, num_position_embeddings=16,
        deepstack_visual_indexes=[0])),
    "paligemma": _vlm_paligemma,
    "gemma3": _vlm_gemma3,
    "idefics2-perceiver": lambda: _vlm_idefics("Idefics2", images=1, perceiver_config=dict(
        hidden_act="silu", resampler_n_latents=4, resampler_depth=1, resampler_n_heads=2, resampler_head_dim=16,
        num_key_value_heads=1)),
    "idefics3": lambda: _vlm_idefics("Idefics3", scale_factor=2, pad_token_id=0),
    "smolvlm": lambda: _vlm_idefics("SmolVLM", scale_factor=2, pad_token_id=0),
    "internvl": lambda: _vlm_simple("InternVL", 4, "qwen2", token_key="image_token_id", image_seq_length=4,
                                    vision_config=dict(_VLM_SMALL_VISION, image_size=[32, 32], patch_size=[8, 8]),
                                    downsample_ratio=0.5),
    "mistral3-pixtral": _vlm_mistral3,
    "aya-vision": lambda: _vlm_simple("AyaVision", None, "cohere2", _COHERE2, downsample_factor=2,
                                      alignment_intermediate_size=64),
    "cohere2-vision": lambda: _vlm_simple("Cohere2Vision", None, "cohere2", _COHERE2, token_key="image_token_id",
                                          downsample_factor=2, alignment_intermediate_size=64),
    "deepseek-vl": lambda: _vlm_simple("DeepseekVL", None, "llama", token_key="image_token_id"),
    "got-ocr2": _vlm_got_ocr2,
    "mllama-cross-attention": _vlm_mllama,
    "lfm2-vl": _vlm_lfm2,
    "blip2-qformer": _vlm_blip2,
    "fuyu": _vlm_fuyu,
}


def _vision_tower(model):
    """The module frozen in the "frozen" pass: the vision encoder (vision_tower, visual, vision_model; Fuyu's patch
    projection)."""
    for owner in (getattr(model, "model", None), model):
        for attr in ("vision_tower", "visual", "vision_model", "vision_embed_tokens"):
            tower = getattr(owner, attr, None) if owner is not None else None
            if tower is not None:
                return tower
    raise RuntimeError(f"{type(model).__name__}: no vision tower found to freeze")


def _vlm_build(name, device):
    import transformers

    if device != "cpu":
        raise RuntimeError("vision-language models run on the CPU (their image-token checks need values)")
    transformers.logging.set_verbosity_error()
    model, ids, pixels = VLM[name]()

    def inputs(train):
        return dict(input_ids=ids, **pixels, **(dict(labels=ids) if train else {}))

    return model, inputs


def _has_torchao() -> bool:
    import importlib.util

    return importlib.util.find_spec("torchao") is not None


def _torchao_build(name, device, small):
    import torch
    import torchao.quantization as Q
    from torchao.quantization import quantize_

    config, arch = TORCHAO[name]
    if arch == "llama":
        model, inputs = _hf_build("llama", device, small)
    else:
        with torch.device(device):
            model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))

        def inputs(train):
            return (torch.randn(16, 256, device=device),)

    model.eval()
    quantize_(model, getattr(Q, config)())
    return model, inputs


# ---- speech, detection and flow, sparse and graph, quantization-aware training, packed recurrent layers ------------
# Small models built here (nothing downloaded, no extra package), each a family's typical layers: a CTC head on a
# convolutional front-end, a conformer block (GLU convolution module), a codec with weight-normalised convolutions,
# reflection padding and an LSTM; an optical-flow warp and deformable attention (sampling grids); a graph convolution on
# a sparse adjacency and a recommender with sparse embedding gradients trained with SparseAdam; quantization-aware
# training (fake quantization of weights and activations); bidirectional recurrent layers over packed sequences.
# Each model's forward returns its loss in training (CTC, regression) so the step trains what a real one would.
# name -> builder() -> (model, inputs(train), optimizer factory or None)


def _ctc_model():
    import torch
    from torch import nn
    import torch.nn.functional as F

    class CTCConv(nn.Module):
        """Convolutional front-end (2 strided Conv1d + GELU) over 16 mel bins, a 2-layer Transformer encoder, a
        linear CTC head over 12 symbols (blank 0)."""

        def __init__(self):
            super().__init__()
            self.front = nn.Sequential(nn.Conv1d(16, 32, 3, stride=2, padding=1), nn.GELU(),
                                       nn.Conv1d(32, 32, 3, stride=2, padding=1), nn.GELU())
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(32, 12)

        def forward(self, mel, targets=None, target_lengths=None):
            h = self.encoder(self.front(mel).transpose(1, 2))
            logp = self.head(h).log_softmax(-1).transpose(0, 1)  # (T, N, C)
            if targets is None:
                return logp
            lengths = torch.full((mel.shape[0],), logp.shape[0], dtype=torch.long)
            return F.ctc_loss(logp, targets, lengths, target_lengths)

    def inputs(train):
        mel = torch.randn(2, 16, 40)
        if not train:
            return (mel,)
        return (mel, torch.randint(1, 12, (2, 5)), torch.tensor([5, 3]))

    return CTCConv(), inputs, None


def _conformer_model():
    import torch
    from torch import nn

    class ConvModule(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.glu = nn.GLU(dim=1)
            self.dw = nn.Conv1d(d, d, 7, padding=3, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.act = nn.SiLU()
            self.pw2 = nn.Conv1d(d, d, 1)

        def forward(self, x):
            y = self.norm(x).transpose(1, 2)
            y = self.pw2(self.act(self.bn(self.dw(self.glu(self.pw1(y))))))
            return x + y.transpose(1, 2)

    class Conformer(nn.Module):
        """One conformer block (half-step feed-forward, self-attention, GLU convolution module, feed-forward, layer
        norm) over a 2-layer Conv2d subsampling front-end."""

        def __init__(self, d=32):
            super().__init__()
            self.sub = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2), nn.ReLU())
            self.proj = nn.Linear(8 * 3, d)
            self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.conv = ConvModule(d)
            self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 10)

        def forward(self, mel):
            x = self.sub(mel.unsqueeze(1))  # (N, 8, T', F')
            x = self.proj(x.permute(0, 2, 1, 3).flatten(2))
            x = x + 0.5 * self.ff1(x)
            x = x + self.attn(x, x, x, need_weights=False)[0]
            x = self.conv(x)
            x = x + 0.5 * self.ff2(x)
            return self.head(self.norm(x))

    return Conformer(), lambda train: (torch.randn(2, 40, 16),), None


def _codec_model():
    import torch
    from torch import nn
    import torch.nn.functional as F
    from torch.nn.utils.parametrizations import weight_norm

    class Codec(nn.Module):
        """An audio codec's shape: weight-normalised Conv1d encoder with reflection padding, an LSTM over the latent
        frames, a weight-normalised ConvTranspose1d decoder; an L1 reconstruction loss in training."""

        def __init__(self):
            super().__init__()
            self.enc1 = weight_norm(nn.Conv1d(1, 16, 7))
            self.enc2 = weight_norm(nn.Conv1d(16, 32, 4, stride=2))
            self.lstm = nn.LSTM(32, 32, num_layers=2, batch_first=True)
            self.dec = weight_norm(nn.ConvTranspose1d(32, 16, 4, stride=2))
            self.out = weight_norm(nn.Conv1d(16, 1, 7))

        def forward(self, wav):
            x = F.elu(self.enc1(F.pad(wav, (3, 3), mode="reflect")))
            x = F.elu(self.enc2(F.pad(x, (1, 1), mode="reflect")))
            y, _ = self.lstm(x.transpose(1, 2))
            x = x + y.transpose(1, 2)
            x = F.elu(self.dec(x))
            rec = self.out(F.pad(x, (3, 3), mode="reflect"))
            if self.training:
                n = min(rec.shape[-1], wav.shape[-1])
                return F.l1_loss(rec[..., :n], wav[..., :n])
            return rec

    return Codec(), lambda train: (torch.randn(2, 1, 64),), None


def _flow_model():
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Flow(nn.Module):
        """Optical flow's warp: features of two frames, a flow field predicted from them, the second frame warped
        back with grid_sample (bilinear) on a base grid from affine_grid; a photometric L1 loss in training."""

        def __init__(self):
            super().__init__()
            self.feat = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1))
            self.flow = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.LeakyReLU(0.1), nn.Conv2d(16, 2, 3, padding=1))

        def forward(self, a, b):
            f = self.flow(torch.cat([self.feat(a), self.feat(b)], 1))
            theta = torch.eye(2, 3).unsqueeze(0).expand(a.shape[0], 2, 3)
            base = F.affine_grid(theta, list(a.shape), align_corners=False)
            warped = F.grid_sample(b, base + f.permute(0, 2, 3, 1), mode="bilinear", padding_mode="border",
                                   align_corners=False)
            return F.l1_loss(warped, a) if self.training else warped

    return Flow(), lambda train: (torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)), None


def _deformable_attention_model():
    import torch
    from torch import nn
    import torch.nn.functional as F

    class DeformableAttention(nn.Module):
        """Deformable DETR's multi-scale deformable attention (one level, 4 heads, 4 points): sampling offsets and
        attention weights predicted from the queries, the value map sampled at the reference points plus offsets
        with grid_sample, the samples weighted and projected."""

        def __init__(self, d=32, heads=4, points=4):
            super().__init__()
            self.h, self.p, self.dh = heads, points, d // heads
            self.offsets = nn.Linear(d, heads * points * 2)
            self.weights = nn.Linear(d, heads * points)
            self.value = nn.Linear(d, d)
            self.out = nn.Linear(d, d)

        def forward(self, query, ref, value, hw):
            n, q, _ = query.shape
            h, w = hw
            v = self.value(value).view(n, h, w, self.h, self.dh).permute(0, 3, 4, 1, 2).flatten(0, 1)
            off = self.offsets(query).view(n, q, self.h, self.p, 2)
            attn = self.weights(query).view(n, q, self.h, self.p).softmax(-1)
            loc = (ref[:, :, None, None, :] + off / torch.tensor([w, h])) * 2 - 1  # grid coordinates in [-1, 1]
            grid = loc.permute(0, 2, 1, 3, 4).flatten(0, 1)  # (n * heads, q, points, 2)
            sampled = F.grid_sample(v, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
            sampled = sampled.view(n, self.h, self.dh, q, self.p)
            y = (sampled * attn.permute(0, 2, 1, 3).unsqueeze(2)).sum(-1)  # (n, heads, dh, q)
            return self.out(y.permute(0, 3, 1, 2).flatten(2))

    def inputs(train):
        return (torch.randn(2, 10, 32), torch.rand(2, 10, 2), torch.randn(2, 64, 32), (8, 8))

    return DeformableAttention(), inputs, None


def _gcn_model():
    import torch
    from torch import nn

    n_nodes = 20
    idx = torch.randint(0, n_nodes, (2, 60), generator=torch.Generator().manual_seed(0))
    idx = torch.cat([idx, torch.arange(n_nodes).repeat(2, 1)], 1)  # self-loops
    adj = torch.sparse_coo_tensor(idx, torch.full((idx.shape[1],), 0.25), (n_nodes, n_nodes)).coalesce()

    class GCN(nn.Module):
        """Two graph convolutions A (X W) with a sparse COO adjacency (torch.sparse.mm), ReLU between them."""

        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(16, 32)
            self.w2 = nn.Linear(32, 4)

        def forward(self, x):
            h = torch.relu(torch.sparse.mm(adj, self.w1(x)))
            return torch.sparse.mm(adj, self.w2(h))

    return GCN(), lambda train: (torch.randn(n_nodes, 16),), None


def _recsys_model():
    import torch
    from torch import nn

    class Recommender(nn.Module):
        """Sparse embeddings (sparse gradients: nn.Embedding(sparse=True) and nn.EmbeddingBag(sparse=True)) of users
        and item histories, a dot-product interaction and an MLP; SparseAdam for the embeddings and Adam for the
        rest, as recommenders train them."""

        def __init__(self):
            super().__init__()
            self.users = nn.Embedding(100, 16, sparse=True)
            self.items = nn.EmbeddingBag(200, 16, mode="mean", sparse=True)
            self.mlp = nn.Sequential(nn.Linear(33, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, user, items, offsets):
            u, i = self.users(user), self.items(items, offsets)
            return self.mlp(torch.cat([u, i, (u * i).sum(-1, keepdim=True)], -1))

    def inputs(train):
        return (torch.tensor([3, 17, 42]), torch.tensor([1, 5, 9, 11, 150, 7, 7]), torch.tensor([0, 3, 5]))

    def optimizer(model):
        sparse = list(model.users.parameters()) + list(model.items.parameters())
        return _Both(torch.optim.SparseAdam(sparse, lr=1e-3), torch.optim.Adam(model.mlp.parameters(), lr=1e-3))

    return Recommender(), inputs, optimizer


class _Both:
    """Two optimizers stepped as one (a sparse one for the embeddings, a dense one for the rest)."""

    def __init__(self, *opts):
        self.opts = opts

    def step(self):
        for o in self.opts:
            o.step()

    def zero_grad(self, set_to_none=True):
        for o in self.opts:
            o.zero_grad(set_to_none=set_to_none)


def _qat_model():
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = torch.ao.quantization.QuantStub()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.fc = nn.Linear(8 * 14 * 14, 10)
            self.dequant = torch.ao.quantization.DeQuantStub()

        def forward(self, x):
            x = self.relu(self.bn(self.conv(self.quant(x))))
            return self.dequant(self.fc(x.flatten(1)))

    model = Net().train()
    model.qconfig = torch.ao.quantization.get_default_qat_qconfig("x86")
    model = torch.ao.quantization.fuse_modules_qat(model, [["conv", "bn", "relu"]])
    torch.ao.quantization.prepare_qat(model, inplace=True)  # fake quantization of weights and activations
    return model, lambda train: (torch.randn(2, 3, 16, 16),), None


def _qat_per_channel_model():
    import torch
    from torch import nn

    class FakeQuantLinear(nn.Linear):
        """A linear layer whose weight is fake-quantized per output channel and whose input per tensor (the
        learnable-scale variant LSQ trains the scales with)."""

        def __init__(self, i, o):
            super().__init__(i, o)
            self.w_scale = nn.Parameter(torch.full((o,), 0.02))
            self.x_scale = nn.Parameter(torch.tensor([0.05]))

        def forward(self, x):
            zp = torch.zeros(self.out_features)
            w = torch._fake_quantize_learnable_per_channel_affine(self.weight, self.w_scale, zp, 0, -128, 127, 1.0)
            x = torch._fake_quantize_learnable_per_tensor_affine(x, self.x_scale, torch.zeros(1), 0, 255, 1.0)
            return nn.functional.linear(x, w, self.bias)

    model = nn.Sequential(FakeQuantLinear(16, 32), nn.ReLU(), FakeQuantLinear(32, 4))
    return model, lambda train: (torch.randn(4, 16),), None


def _packed_rnn_model(cell):
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class Packed(nn.Module):
        """A 2-layer bidirectional recurrent layer over a padded batch packed by length, unpacked after."""

        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, cell)(8, 16, num_layers=2, bidirectional=True, batch_first=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x, lengths):
            out, _ = self.rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
            y, _ = pad_packed_sequence(out, batch_first=True)
            return self.head(y)

    return Packed(), lambda train: (torch.randn(3, 7, 8), torch.tensor([7, 4, 2])), None


NEW_FAMILIES = {
    "speech": {"ctc-conv-frontend": _ctc_model, "conformer-glu": _conformer_model,
               "codec-weightnorm-lstm": _codec_model},
    "detection": {"flow-grid-sample": _flow_model, "deformable-attention": _deformable_attention_model},
    "sparse": {"gcn-sparse-adjacency": _gcn_model, "recsys-sparse-adam": _recsys_model},
    "qat": {"qat-fake-quant": _qat_model, "qat-learnable-per-channel": _qat_per_channel_model},
    "rnn": {"packed-bilstm": lambda: _packed_rnn_model("LSTM"), "packed-bigru": lambda: _packed_rnn_model("GRU")},
}
_OPTIMIZERS: dict = {}  # id(model) -> optimizer factory, for the models that need their own (sparse gradients)


def zoo():
    """[(family, name)] of the whole zoo, in order."""
    import torchvision

    out = [("tv", n) for n in torchvision.models.list_models(module=torchvision.models)]
    out += [("tv-det", n) for n in TV_DET] + [("tv-seg", n) for n in TV_SEG] + [("tv-video", n) for n in TV_VIDEO]
    out += [("timm", n) for n in TIMM] + [("hf", h[0]) for h in HF] + [("vlm", n) for n in VLM]
    out += [(fam, n) for fam, models in NEW_FAMILIES.items() for n in models]
    if _has_torchao():  # optional: quantized inference when torchao is installed
        out += [("torchao", n) for n in TORCHAO]
    return out


def select(only: str | None):
    """The zoo entries named by ``only`` (comma-separated families, ``family/name`` or bare names)."""
    entries = zoo()
    if not only:
        return entries
    keys = [k.strip() for k in only.split(",") if k.strip()]
    picked = [e for e in entries if e[0] in keys or e[1] in keys or f"{e[0]}/{e[1]}" in keys]
    missing = [k for k in keys if not any(k in (e[0], e[1], f"{e[0]}/{e[1]}") for e in entries)]
    if missing:
        raise SystemExit(f"coverage: not in the zoo: {', '.join(missing)} (see --list)")
    return picked


# ---- building a model and its inputs ------------------------------------------------------------------------------

_EAGER = {"deberta-v2", "gemma2", "bloom"}  # no scaled_dot_product_attention path in transformers


def _hf_build(name, device, small):
    import torch
    import transformers

    transformers.logging.set_verbosity_error()  # small vocabularies: warnings about token ids
    _, mtype, cls, overrides, kind = next(h for h in HF if h[0] == name)
    if kind == "clip":
        text = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=32)
        vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      image_size=32, patch_size=8)
        cfg = transformers.AutoConfig.for_model(mtype, text_config=text, vision_config=vision)
    else:
        cfg = transformers.AutoConfig.for_model(mtype, **overrides)
    # scaled_dot_product_attention where the model supports it, else its eager attention
    cfg._attn_implementation = None if mtype in ("mamba", "mamba2") else "eager" if mtype in _EAGER else "sdpa"
    with torch.device(device):
        model = getattr(transformers, cls).from_config(cfg)

    def inputs(train):
        with torch.device(device):
            ids = torch.randint(3, 120, (2, 16))
            if kind == "text":
                return dict(input_ids=ids, labels=ids) if train and "CausalLM" in cls or "MaskedLM" in cls and train \
                    else dict(input_ids=ids)
            if kind == "seq2seq":
                return dict(input_ids=ids, labels=ids[:, :8].contiguous()) if train else \
                    dict(input_ids=ids, decoder_input_ids=ids[:, :8].contiguous())
            if kind == "speech":
                feats = torch.randn(2, 16, 64)
                return dict(input_features=feats, labels=ids[:, :8].contiguous()) if train else \
                    dict(input_features=feats, decoder_input_ids=ids[:, :8].contiguous())
            if kind == "audio":
                return dict(input_values=torch.randn(2, 1600))
            if kind == "image":
                return dict(pixel_values=torch.randn(2, 3, 32, 32), **(dict(labels=torch.tensor([1, 2])) if train
                                                                        else {}))
            if kind == "clip":
                return dict(input_ids=ids, pixel_values=torch.randn(2, 3, 32, 32), attention_mask=torch.ones_like(ids),
                            return_loss=train)
        raise ValueError(kind)

    return model, inputs


@contextlib.contextmanager
def _regnet_widths_on_cpu():
    """torchvision's RegNet builders compute their block widths with tensor ops (and read them back): on the CPU,
    whatever the device the model is built on."""
    import torch
    from torchvision.models import regnet

    orig = regnet.BlockParams.__dict__["from_init_params"]

    def from_init_params(cls, *args, **kwargs):
        with torch.device("cpu"):
            return orig.__func__(cls, *args, **kwargs)

    regnet.BlockParams.from_init_params = classmethod(from_init_params)
    try:
        yield
    finally:
        regnet.BlockParams.from_init_params = orig


def build(family, name, device, tiny=False):
    """(model, inputs(train) -> args or kwargs) for one zoo entry on ``device``; small sizes on the CPU; ``tiny``:
    detection models at 64 x 64 with a handful of proposals (the same ops, for the test suite)."""
    import torch

    small = device == "cpu"
    if family == "hf":
        return _hf_build(name, device, small)
    if family == "torchao":
        return _torchao_build(name, device, small)
    if family == "vlm":
        return _vlm_build(name, device)
    if family in NEW_FAMILIES:
        model, inputs, optimizer = NEW_FAMILIES[family][name]()
        if optimizer is not None:
            _OPTIMIZERS[id(model)] = optimizer
        return model, inputs
    if family == "timm":
        import timm

        with torch.device(device):
            model = timm.create_model(name, pretrained=False, num_classes=10)
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))

        def inputs(train):
            return (torch.randn(2, *size, device=device),)

        return model, inputs
    import torchvision

    if family == "tv":
        with torch.device(device), _regnet_widths_on_cpu():
            model = torchvision.models.get_model(name, weights=None, num_classes=10)
        size = 299 if name == "inception_v3" else 224
        if small and not name.startswith(("vit", "swin", "maxvit", "inception", "googlenet")):
            size = 64
        return model, lambda train: (torch.randn(2, 3, size, size, device=device),)
    if family == "tv-seg":
        with torch.device(device):
            model = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=5,
                                                 aux_loss=False)
        return model, lambda train: (torch.randn(2, 3, 96, 96, device=device),)
    if family == "tv-video":
        with torch.device(device):
            model = torchvision.models.get_model(name, weights=None, num_classes=5)
        shape = (1, 3, 16, 224, 224) if name.startswith(("mvit", "s3d")) else (1, 3, 8, 112, 112)
        return model, lambda train: (torch.randn(*shape, device=device),)
    if family == "tv-det":
        kw = dict(weights=None, weights_backbone=None, num_classes=5)
        if not name.startswith("ssd"):
            kw.update(min_size=64 if tiny else 128, max_size=64 if tiny else 128)
        if "rcnn" in name:  # fewer proposals: the arithmetic per proposal is the same
            kw.update(rpn_pre_nms_top_n_train=200, rpn_post_nms_top_n_train=64, rpn_pre_nms_top_n_test=200,
                      rpn_post_nms_top_n_test=64, box_batch_size_per_image=32, box_detections_per_img=16)
            if tiny:
                kw.update(rpn_pre_nms_top_n_train=50, rpn_post_nms_top_n_train=8, rpn_pre_nms_top_n_test=50,
                          rpn_post_nms_top_n_test=8, box_batch_size_per_image=8, rpn_batch_size_per_image=16)
        if name.startswith(("retinanet", "fcos")):
            kw.update(topk_candidates=64, detections_per_img=16)
        with torch.device(device):
            model = torchvision.models.get_model(name, **kw)
        side = 320 if name.startswith("ssdlite") else 64 if tiny else 128

        def inputs(train):
            imgs = [torch.rand(3, side, side, device=device) for _ in range(2 if name.startswith("ssd") else 1)]
            if not train:
                return (imgs,)
            tgt = []
            for _ in imgs:
                t = {"boxes": torch.tensor([[10.0, 20.0, 60.0, 90.0]], device=device),
                     "labels": torch.tensor([1], device=device)}
                if "mask" in name:
                    t["masks"] = torch.zeros(1, side, side, dtype=torch.uint8, device=device)
                    t["masks"][:, 20:90, 10:60] = 1
                if "keypoint" in name:
                    t["keypoints"] = torch.tensor([[[15.0, 25.0, 1.0]] * 17], device=device)
                tgt.append(t)
            return (imgs, tgt)

        return model, inputs
    raise ValueError(family)


def _loss(out):
    """A scalar to backpropagate from any model output: the model's loss when it returns one, else the sum of the
    means of its floating-point tensors."""
    import torch

    loss = getattr(out, "loss", None) if not isinstance(out, dict) else out.get("loss")
    if isinstance(out, dict) and loss is None and out and all(isinstance(v, torch.Tensor) and v.dim() == 0
                                                               for v in out.values()):
        return sum(out.values())  # detection losses
    if loss is not None:
        return loss
    tensors = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            if x.is_floating_point() and x.requires_grad:
                tensors.append(x)
        elif isinstance(x, dict) or hasattr(x, "values") and not isinstance(x, torch.Tensor):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(out)
    if not tensors:
        raise RuntimeError("the model returned no floating-point tensor to train on")
    return sum(t.float().mean() for t in tensors)


def _call(model, args):
    return model(**args) if isinstance(args, dict) else model(*args)


# Models whose inference under no_grad trips torch's ModuleTracker (FlopCounterMode's module tracking, whose
# semantics roofline shares): "Expected gradient function to be set" from register_multi_grad_hook. Their inference
# pass runs with autograd enabled (the same forward ops, no backward).
_GRAD_INFERENCE: set = set()


def _step(model, inputs, train, optimizer):
    import torch

    args = inputs(train)
    if not train:
        with torch.set_grad_enabled(id(model) in _GRAD_INFERENCE):
            return _call(model, args)
    out = _call(model, args)
    _loss(out).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return None


# ---- one model ---------------------------------------------------------------------------------------------------

def _with_fcm(model, inputs, train, optimizer):
    """One more step counted by roofline and FlopCounterMode at once (roofline's mode on top, FlopCounterMode below it
    sees the same op stream: a data-dependent model takes the same path for both)."""
    from torch.utils.flop_counter import FlopCounterMode

    import roofline

    with FlopCounterMode(display=False) as fc:
        with roofline.measure(model, timing=None) as r:
            _step(model, inputs, train, optimizer)
    fcm = {str(k): int(v) for k, v in fc.get_flop_counts().get("Global", {}).items()}
    return r, fcm


def _one_mode(model, inputs, mode, quick=False):
    """One pass of ``mode``: "infer", "train" (a training step) or "frozen" (a training step with the vision tower's
    parameters frozen, as when a vision-language model's projector and language model are fine-tuned)."""
    if mode != "frozen":
        return _one_mode_plain(model, inputs, mode == "train", quick)
    params = list(_vision_tower(model).parameters())
    if not params:
        raise RuntimeError(f"{type(model).__name__}: its vision tower has no parameters to freeze")
    was = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        return _one_mode_plain(model, inputs, True, quick)
    finally:
        for p, w in zip(params, was):
            p.requires_grad_(w)


def _one_mode_plain(model, inputs, train, quick=False):
    import torch

    model.train(train)
    if not train:
        try:
            return _one_mode_run(model, inputs, train, None, quick)
        except AssertionError as e:
            if "gradient function" not in str(e) or id(model) in _GRAD_INFERENCE:
                raise
            _GRAD_INFERENCE.add(id(model))
            res = _one_mode_run(model, inputs, train, None, quick)
            res["note"] = "inference with autograd enabled (torch's ModuleTracker fails under no_grad)"
            return res
    if train and id(model) in _OPTIMIZERS:
        opt = _OPTIMIZERS[id(model)](model)
    else:
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, foreach=True) \
            if train else None
    return _one_mode_run(model, inputs, train, opt, quick)


def _one_mode_run(model, inputs, train, opt, quick=False):
    """A pass counted by roofline alone (timed), then one counted by roofline and FlopCounterMode together; ``quick``:
    the second pass only (its time includes FlopCounterMode's)."""
    import roofline

    t0 = time.perf_counter()
    if not quick:
        with roofline.measure(model, timing=None) as r:
            _step(model, inputs, train, opt)
    elapsed = time.perf_counter() - t0
    r2, fcm = _with_fcm(model, inputs, train, opt)
    if quick:
        r, elapsed = r2, time.perf_counter() - t0
    ours = {str(k): int(v) for k, v in r2.flop_counter_compatible().get("Global", {}).items()}
    mismatch = {k: (ours.get(k, 0), fcm.get(k, 0)) for k in set(ours) | set(fcm) if ours.get(k, 0) != fcm.get(k, 0)}
    by_op = r2.by_op()
    true_vs_fcm = {}
    for name, row in by_op.items():
        packet = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
        if row["matrix_flops"] and row["matrix_flops"] != fcm.get(packet, 0):
            true_vs_fcm[name] = (int(row["matrix_flops"]), fcm.get(packet, 0))
    return {"calls": int(len(r.records)), "unknown": dict(r.unknown_ops),
            "errors": {k: v[0] for k, v in r.errors.items()}, "fcm_mismatch": mismatch,
            "true_vs_fcm": true_vs_fcm, "matrix_flops": int(r.matrix_flops), "time_s": round(elapsed, 3)}


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds):
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def fire(*_):
        raise _Timeout(f"over {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(int(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# Families whose models run data-dependent code (proposals, NMS, image-token checks): straight to the CPU.
_CPU_FIRST = {"tv-det", "vlm"} | set(NEW_FAMILIES)  # the new families: small, and sparse / CTC / packing need values
_MODES = ("infer", "frozen", "train")  # every pass a family may run, in the order they are printed


def _modes(family):
    """The passes counted for a family's models."""
    return ("infer",) if family in _INFER_ONLY else _VLM_MODES if family == "vlm" else ("infer", "train")


def run_model(family, name, timeout=None, devices=None, quick=False):
    """Count one zoo entry (inference and a training step; vision-language models also a training step with the
    vision tower frozen). Returns a dict: family, name, device, infer, train and, for vision-language models, frozen
    (each from _one_mode; train None for an inference-only family), covered. ``quick``: one pass per mode, counted by
    roofline and FlopCounterMode together, and detection models at their smallest (the test suite's setting)."""
    import torch

    torch.manual_seed(0)
    res = {"family": family, "name": name}
    tried = []
    for device in devices or (("cpu",) if family in _CPU_FIRST else ("meta", "cpu")):
        try:
            with _deadline(timeout), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model, inputs = build(family, name, device, tiny=quick)
                res["train"] = None  # an inference-only family
                for mode in _modes(family):
                    res[mode] = _one_mode(model, inputs, mode, quick)
            res["device"] = device
            break
        except Exception as e:  # noqa: BLE001 - a model that fails is reported, the sweep goes on
            tried.append(f"{device}: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
            for mode in _MODES:
                res.pop(mode, None)
    if "device" not in res:
        res["failed"] = " | ".join(tried)
        res["covered"] = False
        return res
    if tried:
        res["meta_failed"] = tried[0]
    res["covered"] = all(not res[m]["unknown"] and not res[m]["errors"] for m in _MODES if res.get(m) is not None)
    return res


# ---- output ------------------------------------------------------------------------------------------------------

def _fmt(d, limit=4):
    if not d:
        return "-"
    items = sorted(d.items(), key=lambda kv: str(kv[0]))
    s = ", ".join(f"{k.replace('aten.', '')}={v}" for k, v in items[:limit])
    return s + (f", +{len(items) - limit}" if len(items) > limit else "")


def line(res) -> str:
    head = f"{res['family'] + '/' + res['name']:<46}"
    if "failed" in res:
        return f"{head} FAILED {res['failed']}"
    out = []
    width = max(len(m) for m in _MODES if res.get(m) is not None)
    for m in _MODES:
        d = res.get(m)
        if d is None:  # a pass the family does not run
            continue
        out.append(f"{head} {res['device']:<4} {m:<{width}} {d['calls']:>6} calls {d['time_s']:>7.2f}s  "
                   f"unknown: {_fmt(d['unknown'])}  errors: {_fmt(d['errors'])}  fcm!=: {_fmt(d['fcm_mismatch'])}  "
                   f"true!=fcm: {_fmt(d['true_vs_fcm'], 2)}" + (f"  ({d['note']})" if d.get("note") else ""))
    return "\n".join(out)


def summary(results) -> str:
    n = len(results)
    k = sum(1 for r in results if r["covered"])
    unknown: dict = {}
    for r in results:
        for m in _MODES:
            for op in (r.get(m) or {}).get("unknown", {}):
                unknown.setdefault(op, []).append(r["name"])
    lines = []
    if unknown:
        lines.append("unknown ops across the zoo:")
        for op, models in sorted(unknown.items()):
            lines.append(f"  {op}: {', '.join(sorted(set(models)))}")
    failed = [r for r in results if "failed" in r]
    if failed:
        lines.append(f"models that did not run ({len(failed)}): " + ", ".join(r["name"] for r in failed))
    cpu = [r["name"] for r in results if r.get("device") == "cpu"]
    if cpu:
        lines.append(f"counted on the CPU at small sizes ({len(cpu)}): " + ", ".join(cpu))
    mism = [r["name"] for r in results if any((r.get(m) or {}).get("fcm_mismatch") for m in _MODES)]
    lines.append(f"models where roofline's FlopCounterMode-compatible count differs from FlopCounterMode: "
                 f"{len(mism)}" + (f" ({', '.join(mism)})" if mism else ""))
    lines.append(f"{k}/{n} models fully covered")
    return "\n".join(lines)


def versions() -> str:
    import platform

    import timm
    import torch
    import torchvision
    import transformers

    return (f"python {platform.python_version()}, torch {torch.__version__}, torchvision {torchvision.__version__}, "
            f"timm {timm.__version__}, transformers {transformers.__version__}")


def _worker(entries, timeout):
    for fam, name in entries:
        res = run_model(fam, name, timeout)
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated families (tv, tv-det, tv-seg, tv-video, timm, hf, vlm, "
                    "speech, detection, sparse, qat, rnn, torchao: when installed, inference only) or model names")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes, each run under `nice -n 10`")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per model and device before giving up")
    ap.add_argument("--json", help="write every result to this JSON file")
    ap.add_argument("--list", action="store_true", help="print the zoo and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    entries = select(args.only)
    if args.list:
        for fam, name in entries:
            print(f"{fam}/{name}")
        print(f"{len(entries)} models")
        return 0
    if args.worker:
        _worker(entries, args.timeout)
        return 0
    print(f"# {versions()}")
    print(f"# {len(entries)} models, {args.jobs} process(es)")
    if any(fam == "vlm" for fam, _ in entries):
        for name, why in VLM_SKIPPED.items():
            print(f"# vlm/{name}: not in the family: {why}")
    t0 = time.perf_counter()
    results = []
    # a bar on a terminal's stderr (nothing in a log or a pipe), the result lines printed above it
    from roofline._util import _progress

    bar = _progress.auto(f"coverage sweep, {len(entries)} models")
    show = bar.above if bar is not None else (lambda text: print(text, flush=True))
    if args.jobs <= 1:
        for i, (fam, name) in enumerate(entries):
            if bar is not None:
                bar(f"{fam}/{name} ({i}/{len(entries)})")
            res = run_model(fam, name, args.timeout)
            show(line(res))
            results.append(res)
    else:
        chunks = [entries[i::args.jobs] for i in range(args.jobs)]
        procs = []
        for chunk in chunks:
            if not chunk:
                continue
            names = ",".join(f"{f}/{n}" for f, n in chunk)
            cmd = ["nice", "-n", "10", sys.executable, os.path.abspath(__file__), "--worker", "--only", names,
                   "--timeout", str(args.timeout)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                          env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
                                                   os.environ.get("PYTHONPATH", ""))))
        import queue
        import threading

        lines: queue.Queue = queue.Queue()

        def pump(proc):
            for raw in proc.stdout:
                lines.put(raw)
            lines.put(None)

        for p in procs:
            threading.Thread(target=pump, args=(p,), daemon=True).start()
        open_workers = len(procs)
        while open_workers:  # results in the order they finish, whichever worker
            raw = lines.get()
            if raw is None:
                open_workers -= 1
                continue
            res = json.loads(raw)
            show(line(res))
            results.append(res)
            if bar is not None:
                bar(f"{res['family']}/{res['name']} done ({len(results)}/{len(entries)})")
        for p in procs:
            p.wait()
        done = {(r["family"], r["name"]) for r in results}
        for fam, name in entries:  # a worker that died: its remaining models are reported as failed
            if (fam, name) not in done:
                results.append({"family": fam, "name": name, "failed": "worker process exited", "covered": False})
    if bar is not None:
        bar.close(f"{len(results)} models")
    print(summary(results))
    print(f"# sweep time {time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["covered"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
