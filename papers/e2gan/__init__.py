"""E²GAN (Gong et al., ICML 2024): efficient GAN distillation from an image editor, with a base
model, crucial-layer LoRA and rank search."""
from .lora import add_lora, adapter_state, merge_lora
from .models import E2GANGenerator, PatchDiscriminator, Pix2PixGenerator
from .teacher import InstructPix2PixTeacher, SkimageTeacher
from .text import CLIPTextEncoder, HashedTextEncoder

__all__ = ["E2GANGenerator", "Pix2PixGenerator", "PatchDiscriminator", "add_lora", "merge_lora", "adapter_state",
           "SkimageTeacher", "InstructPix2PixTeacher", "HashedTextEncoder", "CLIPTextEncoder"]
