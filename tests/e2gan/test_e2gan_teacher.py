"""The scikit-image teacher, the data and the hashed text encoder."""
import numpy as np
import torch

from papers.e2gan.data import make_inputs, teacher_pairs
from papers.e2gan.teacher import CONCEPTS, NEW_CONCEPTS, SkimageTeacher
from papers.e2gan.text import HashedTextEncoder

IMAGES = make_inputs(4, 16, seed=0)


def test_teacher_is_deterministic_per_seed():
    t = SkimageTeacher(jitter=0.2)
    for prompt in [*CONCEPTS, *NEW_CONCEPTS]:
        a, b = t.edit(IMAGES, prompt, seed=3), t.edit(IMAGES, prompt, seed=3)
        np.testing.assert_array_equal(a, b)
        assert a.shape == IMAGES.shape and a.min() >= 0 and a.max() <= 1
        assert np.abs(a - IMAGES).mean() > 1e-3, prompt  # every edit changes the image
    assert not np.array_equal(t.edit(IMAGES, "film grain", 3), t.edit(IMAGES, "film grain", 4))


def test_pool_size_and_new_concepts_reuse_words():
    assert 25 <= len(CONCEPTS) <= 35 and len(NEW_CONCEPTS) == 5
    known = {w for p in CONCEPTS for w in p.split()}
    for p in NEW_CONCEPTS:
        assert p not in CONCEPTS and any(w in known for w in p.split()), p


def test_pairs_are_written_with_prompt_and_seed(tmp_path):
    t = SkimageTeacher()
    out = teacher_pairs(t, IMAGES, "sepia", 7, tmp_path)
    (path,) = tmp_path.glob("*.npz")
    with np.load(path) as z:
        assert str(z["prompt"]) == "sepia" and int(z["seed"]) == 7
        np.testing.assert_array_equal(z["outputs"], out)
    np.testing.assert_array_equal(teacher_pairs(t, IMAGES, "sepia", 7, tmp_path), out)


def test_hashed_encoder_shares_words():
    enc = HashedTextEncoder(dim=16, max_tokens=4)
    tokens, mask = enc.encode(["sepia", "sepia with vignette"])
    assert tokens.shape == (2, 4, 16) and mask.tolist() == [[True, False, False, False], [True] * 3 + [False]]
    torch.testing.assert_close(tokens[0, 0], tokens[1, 0])
    torch.testing.assert_close(enc.encode(["vignette"])[0][0, 0], tokens[1, 2])



def test_every_edit_is_finite():
    """A NaN in a teacher output poisons every model trained on it (skimage 0.26's unsharp_mask returned
    one NaN pixel on its first call in a process; sharpen is now written out)."""
    import numpy as np

    from papers.e2gan.teacher import SkimageTeacher

    t = SkimageTeacher()
    x = np.random.default_rng(0).uniform(size=(3, 16, 16, 3))
    assert [p for p in t.prompts() if not np.isfinite(t.edit(x, p, 0)).all()] == []
