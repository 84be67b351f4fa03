"""The full-profile teacher and CLIP text encoder, on a tiny InstructPix2Pix pipeline saved locally."""
import numpy as np
import pytest
import torch

from papers.e2gan.teacher import InstructPix2PixTeacher
from papers.e2gan.text import CLIPTextEncoder
from shared.assets import MissingAssetError


@pytest.fixture(scope="module")
def tiny_pipeline(tmp_path_factory):
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline,
                           UNet2DConditionModel)
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import CLIPTextConfig, CLIPTextModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = ["[PAD]", "[UNK]", "make", "it", "sepia", "with", "vignette", "hue", "shift", "120"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", model_max_length=8)
    text_encoder = CLIPTextModel(CLIPTextConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                                                num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=8))
    unet = UNet2DConditionModel(sample_size=8, in_channels=8, out_channels=4, block_out_channels=(8, 16),
                                layers_per_block=1, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
                                attention_head_dim=2, norm_num_groups=4)
    vae = AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(8,), latent_channels=4, norm_num_groups=4,
                        down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",), sample_size=16)
    pipe = StableDiffusionInstructPix2PixPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                                  scheduler=EulerAncestralDiscreteScheduler(), safety_checker=None,
                                                  feature_extractor=None, requires_safety_checker=False)
    path = tmp_path_factory.mktemp("ip2p")
    pipe.save_pretrained(path)
    return path


def test_full_teacher_on_saved_tiny_pipeline(tiny_pipeline):
    teacher = InstructPix2PixTeacher(tiny_pipeline, steps=2, edit_resolution=16, batch_size=2)
    images = np.random.default_rng(0).uniform(size=(3, 12, 12, 3)).astype(np.float32)
    a = teacher.edit(images, "make it sepia", seed=1)
    assert a.shape == images.shape and a.dtype == np.float32 and 0 <= a.min() and a.max() <= 1
    np.testing.assert_array_equal(a, teacher.edit(images, "make it sepia", seed=1))
    assert not np.array_equal(a, teacher.edit(images, "make it sepia", seed=2))


def test_clip_text_encoder_from_the_same_folder(tiny_pipeline):
    enc = CLIPTextEncoder(tiny_pipeline, max_tokens=8)
    tokens, mask = enc.encode(["make it sepia", "hue shift 120"])
    assert tokens.shape == (2, 8, 16) and enc.dim == 16
    assert mask.sum(1).tolist() == [3, 3]


def test_missing_weights_stop_with_one_message(tmp_path):
    from papers.e2gan.experiments import make_teacher
    from shared.config import Config

    cfg = Config.wrap({"device": "cpu", "teacher": {"kind": "instruct_pix2pix", "path": str(tmp_path / "nope")}})
    with pytest.raises(MissingAssetError, match="teacher.path"):
        make_teacher(cfg)
