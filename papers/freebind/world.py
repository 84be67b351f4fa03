"""The synthetic multimodal world (tiny and smoke profiles).

Each event has a class c (10 digits), a visual-only colour (5 values), an audio-only envelope
(5 values) and a shared intensity t ~ U(0.3, 1). From an event:

- image: an sklearn-digits exemplar of class c, tinted by the colour, scaled by t, plus noise (8·8·3 = 192-d);
- audio: a 24×16 spectrogram (class harmonics ⊗ envelope)·t plus a weaker distractor class and noise (384-d);
- text: ≤ 8 tokens: a class synonym, colour and envelope words (each with p=.85), an intensity word
  (p=.7) and fillers.

The experts' captions (`texts(..., intensity_reliability=r)`): with probability 1 − r an audio-text
expert's training caption carries a random intensity word instead of the true one, so at r = 0 the
expert never learns loudness, which the unified space learns from image brightness (U knows something
the expert lacks, as ImageBind knows visual correlates that CLAP does not).

The "U-visibility of audio-only attributes" knob (`envelope_visibility`, v): with probability v an
event's envelope equals its colour (one attribute drives both, so the image-text-trained unified
space can represent the envelope); otherwise the envelope is drawn independently and U never
sees it. The world's structure (palette, harmonics, envelopes) is fixed by `structure_seed`; the run
seed only changes which events are drawn.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

N_CLASSES, N_COLOURS, N_ENVS, N_INTENSITY = 10, 5, 5, 3
MAX_TOKENS = 8
N_FREQ, N_TIME = 24, 16
SYNONYMS = 2
N_FILLERS = 10
# vocabulary layout: 0 pad | class synonyms | colours | envelopes | intensities | fillers
CLS0 = 1
COL0 = CLS0 + N_CLASSES * SYNONYMS
ENV0 = COL0 + N_COLOURS
INT0 = ENV0 + N_ENVS
FIL0 = INT0 + N_INTENSITY
VOCAB = FIL0 + N_FILLERS
MODALITIES = ("audio", "image", "text")


@dataclass
class WorldSpec:
    envelope_visibility: float = 0.0
    image_noise: float = 0.25
    audio_noise: float = 0.25
    distractor: float = 0.5
    p_attr: float = 0.85
    p_intensity: float = 0.7
    structure_seed: int = 0


@dataclass
class Events:
    cls: np.ndarray
    colour: np.ndarray
    envelope: np.ndarray
    intensity: np.ndarray
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cls)

    def repeat(self, k: int) -> "Events":
        """Each event k times in a row (item i at rows i·k … i·k + k − 1): k captions per item."""
        return Events(*(np.repeat(getattr(self, f), k) for f in ("cls", "colour", "envelope", "intensity")))


class World:
    def __init__(self, spec: WorldSpec):
        from sklearn.datasets import load_digits

        self.spec = spec
        rng = np.random.default_rng(spec.structure_seed)
        digits = load_digits()
        self.exemplars = [digits.data[digits.target == c] / 16.0 for c in range(N_CLASSES)]
        self.palette = np.array([[1, .15, .15], [.15, 1, .15], [.15, .15, 1], [1, 1, .1], [.9, .2, 1.]])
        f = np.arange(N_FREQ)
        harm = np.zeros((N_CLASSES, N_FREQ))
        for c in range(N_CLASSES):  # three harmonic-like peaks per class at class-specific bins
            for centre in rng.choice(N_FREQ, size=3, replace=False):
                harm[c] += np.exp(-0.5 * ((f - centre) / 0.8) ** 2)
        self.harmonics = harm / harm.max(1, keepdims=True)
        t = np.linspace(0, 1, N_TIME)
        self.envelopes = np.stack([t, 1 - t, np.full_like(t, .6), np.exp(-0.5 * ((t - .5) / .12) ** 2),
                                   np.exp(-0.5 * ((t - .25) / .08) ** 2) + np.exp(-0.5 * ((t - .75) / .08) ** 2)])

    # ----- events -----
    def sample_events(self, n: int, rng: np.random.Generator, class_prior: np.ndarray | None = None) -> Events:
        cls = rng.choice(N_CLASSES, size=n, p=class_prior)
        colour = rng.integers(0, N_COLOURS, size=n)
        tied = rng.random(n) < self.spec.envelope_visibility
        envelope = np.where(tied, colour % N_ENVS, rng.integers(0, N_ENVS, size=n))
        intensity = rng.uniform(0.3, 1.0, size=n)
        return Events(cls, colour, envelope, intensity)

    # ----- modalities -----
    def images(self, ev: Events, rng: np.random.Generator) -> torch.Tensor:
        out = np.empty((len(ev), 64, 3))
        for i, c in enumerate(ev.cls):
            ex = self.exemplars[c][rng.integers(len(self.exemplars[c]))]
            out[i] = ex[:, None] * self.palette[ev.colour[i]][None, :] * ev.intensity[i]
        out += self.spec.image_noise * rng.standard_normal(out.shape)
        return torch.tensor(out.reshape(len(ev), -1), dtype=torch.float32)

    def audios(self, ev: Events, rng: np.random.Generator) -> torch.Tensor:
        n = len(ev)
        spec = self.harmonics[ev.cls][:, :, None] * self.envelopes[ev.envelope][:, None, :] * ev.intensity[:, None, None]
        distract = rng.integers(0, N_CLASSES, size=n)
        d_env = rng.integers(0, N_ENVS, size=n)
        spec = spec + self.spec.distractor * rng.uniform(0.2, 1.0, size=(n, 1, 1)) * (
            self.harmonics[distract][:, :, None] * self.envelopes[d_env][:, None, :])
        spec = spec + self.spec.audio_noise * rng.standard_normal(spec.shape)
        return torch.tensor(spec.reshape(n, -1), dtype=torch.float32)

    def texts(self, ev: Events, rng: np.random.Generator, intensity_reliability: float = 1.0) -> torch.Tensor:
        """Captions; an intensity word is the event's own with probability `intensity_reliability`,
        else a random one."""
        n = len(ev)
        out = np.zeros((n, MAX_TOKENS), dtype=np.int64)
        for i in range(n):
            toks = [CLS0 + ev.cls[i] * SYNONYMS + rng.integers(SYNONYMS)]
            if rng.random() < self.spec.p_attr:
                toks.append(COL0 + ev.colour[i])
            if rng.random() < self.spec.p_attr:
                toks.append(ENV0 + ev.envelope[i])
            if rng.random() < self.spec.p_intensity:
                level = min(int((ev.intensity[i] - 0.3) / 0.7 * N_INTENSITY), N_INTENSITY - 1)
                if rng.random() >= intensity_reliability:
                    level = rng.integers(N_INTENSITY)
                toks.append(INT0 + level)
            n_fill = rng.integers(0, MAX_TOKENS - len(toks) + 1)
            toks += list(FIL0 + rng.integers(0, N_FILLERS, size=n_fill))
            rng.shuffle(toks)
            out[i, :len(toks)] = toks
        return torch.tensor(out)

    def render(self, ev: Events, modality: str, rng: np.random.Generator, **kw) -> torch.Tensor:
        return {"audio": self.audios, "image": self.images, "text": self.texts}[modality](ev, rng, **kw)

    @staticmethod
    def class_prompts() -> torch.Tensor:
        """(N_CLASSES·SYNONYMS, MAX_TOKENS): one prompt per class synonym, row c·SYNONYMS + s."""
        out = np.zeros((N_CLASSES * SYNONYMS, MAX_TOKENS), dtype=np.int64)
        out[:, 0] = CLS0 + np.arange(N_CLASSES * SYNONYMS)
        return torch.tensor(out)


def skewed_prior(strength: float = 0.6) -> np.ndarray:
    """A class prior for the second audio-text expert: linearly skewed (ratio (1+s)/(1-s))."""
    w = np.linspace(1 - strength, 1 + strength, N_CLASSES)
    return w / w.sum()
