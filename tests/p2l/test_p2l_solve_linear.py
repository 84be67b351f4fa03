"""`solve` and `tweedie` on a linear prior, where every update rule has a closed form.

The prior `LinearPrior` has D(z) = W z, E(x) = M x (a posterior with zero variance, so PSLD's draw
is the mean) and a denoiser ε_θ(z_t, t, C) = ε(C) that does not look at z_t. Then
ẑ₀ = (z_t − √(1−ᾱ_t) ε(C)) / √ᾱ_t, ∂ẑ₀/∂z_t = I/√ᾱ_t, and the gradient of each guidance term is a
matrix product. Every linear operator is read as its matrix (A, and the pseudo-adjoint P = Aᵖ) by
applying it to the basis.

With two DDIM steps (t = 501, then t = 1) the latent the solver feeds the denoiser at the second
step is z_{t−1} = √ᾱ_{t−1} z* + √(1−ᾱ_{t−1}) ε̂ − ∇_{z_t}(guidance), which each test predicts.
"""
from types import SimpleNamespace

import pytest
import torch

from papers.p2l import build_operator, solve
from papers.p2l.models import build_scheduler
from papers.p2l.solver import tweedie

from test_p2l_solver import tiny_ldm

IMAGE = (3, 4, 4)
N = 3 * 4 * 4                      # the latent has the image's size, so D can be invertible
B = 2
STEPS = 2


class LinearPrior:
    """A stand-in for `LatentDiffusion`: linear D and E, a denoiser that depends on C only, and a
    record of every denoiser call (its z_t, t, C, and whether C was being tuned)."""

    def __init__(self, W, M, eps_of_prompt, C_null):
        self.W, self.M, self.eps_of_prompt, self.C_null = W, M, eps_of_prompt, C_null
        self.device = torch.device("cpu")
        self.scheduler = build_scheduler()
        self.unet = SimpleNamespace(config=SimpleNamespace(sample_size=IMAGE[-1]))
        self.latent_channels = IMAGE[0]
        self.calls = []

    def null_prompt(self, batch):
        return self.C_null.expand(batch, -1, -1).clone()

    def eps(self, z, t, C):
        self.calls.append({"z": z.detach().clone(), "t": int(t), "C": C.detach().clone(), "tuning": C.requires_grad})
        return self.eps_of_prompt(C).view(z.shape)

    def decode(self, z):
        return (z.flatten(1) @ self.W.T).view(z.shape[0], *IMAGE)

    def encode(self, x, sample=False, generator=None):
        return (x.flatten(1) @ self.M.T).view(x.shape[0], *IMAGE)


def near_identity(seed, n=N):
    g = torch.Generator().manual_seed(seed)
    return torch.eye(n) + 0.3 * torch.randn(n, n, generator=g) / n**0.5


def linear_prior(M=None, seed=0):
    """ε(C) = (mean over tokens of C) · V, so the prompt moves ẑ₀ and has a gradient."""
    g = torch.Generator().manual_seed(seed + 100)
    C_null = torch.randn(1, 3, 8, generator=g)
    V = torch.randn(8, N, generator=g) / 8**0.5
    W = near_identity(seed)
    return LinearPrior(W, near_identity(seed + 1) if M is None else M, lambda C: C.mean(1) @ V, C_null)


def matrix_of(linear_map, shape):
    """The matrix of a linear map on tensors of `shape` (per sample), by applying it to the basis."""
    n = int(torch.tensor(shape).prod())
    return linear_map(torch.eye(n, dtype=torch.float64).view(n, *shape)).flatten(1).T


def measured(task, seed=0):
    op = build_operator(task, IMAGE[-1], factor=2, kernel_size=3, blur_sigma=1.0, box=2)
    x = torch.rand(B, *IMAGE, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    y = op.measure(x, seed)
    A = matrix_of(op.forward, IMAGE)
    P = matrix_of(op.pseudo_adjoint, y.shape[1:])
    return op, y, A, P


def alphas(prior):
    """ᾱ at the two DDIM steps (t = 501, 1): the second is also the first step's ᾱ_{t−1}."""
    sched = prior.scheduler
    sched.set_timesteps(STEPS)
    return [sched.alphas_cumprod[int(t)].double() for t in sched.timesteps]


def unit(v):
    return v / v.norm(dim=1, keepdim=True)


def first_step(prior):
    """z_T (the first denoiser call's input), ε̂ and ẑ₀ at the first step, per sample, in float64."""
    a_T, _ = alphas(prior)
    z_T = prior.calls[0]["z"].flatten(1).double()
    eps = prior.eps_of_prompt(prior.calls[0]["C"]).double()
    return z_T, eps, (z_T - (1 - a_T).sqrt() * eps) / a_T.sqrt()


def ddim_then(prior, z0, eps, grad):
    """The latent the second step must see: √ᾱ_{t−1} z* + √(1−ᾱ_{t−1}) ε̂ − ∇."""
    _, a_prev = alphas(prior)
    return a_prev.sqrt() * z0 + (1 - a_prev).sqrt() * eps - grad


def second_latent(prior):
    assert [c["t"] for c in prior.calls] == [501, 1]
    return prior.calls[1]["z"].flatten(1).double()


# ---- Tweedie ------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [1, 301, 981])
def test_tweedie_recovers_the_z0_it_inverts(t):
    g = torch.Generator().manual_seed(t)
    z0, eps = torch.randn(B, N, generator=g, dtype=torch.float64), torch.randn(B, N, generator=g, dtype=torch.float64)
    prior = LinearPrior(torch.eye(N), torch.eye(N), lambda C: eps, torch.zeros(1, 3, 8))
    a = prior.scheduler.alphas_cumprod[t].double()
    z_t = a.sqrt() * z0 + (1 - a).sqrt() * eps            # forward noising of a known z₀ with a known ε
    z0_hat, eps_hat = tweedie(prior, z_t, t, prior.null_prompt(B), a)
    assert torch.allclose(z0_hat, z0, atol=1e-10)
    assert torch.equal(eps_hat, eps)


def test_ddim_with_a_constant_denoiser_keeps_its_tweedie_estimate():
    """With ε_θ ≡ ε, z_{t−1} = √ᾱ_{t−1} ẑ₀ + √(1−ᾱ_{t−1}) ε has the same ẑ₀ at every step: the solver
    must pair each z_t with its own ᾱ_t, at every step of a longer schedule."""
    eps = torch.randn(B, N, generator=torch.Generator().manual_seed(5))
    prior = LinearPrior(torch.eye(N), torch.eye(N), lambda C: eps, torch.zeros(1, 3, 8))
    op, y, _, _ = measured("sr")
    sol = solve("ddim", y, op, prior, steps=7, seed=3)
    a_T = prior.scheduler.alphas_cumprod[prior.calls[0]["t"]]
    z_T = prior.calls[0]["z"].flatten(1)
    assert len(prior.calls) == 7
    assert torch.allclose(sol.z0.flatten(1), (z_T - (1 - a_T).sqrt() * eps) / a_T.sqrt(), atol=1e-5)


# ---- the latent data-consistency step (sign of the DC step) -------------------------------------

@pytest.mark.parametrize("task", ["sr", "gblur", "inpaint_box"])
def test_ldps_step_is_minus_rho_times_the_closed_form_gradient(task):
    """z_{t−1} = DDIM(ẑ₀, ε̂) − ρ ∇_{z_t}‖y − A W ẑ₀‖, with ∇ = −(1/√ᾱ_t) Wᵀ Aᵀ r/‖r‖."""
    op, y, A, _ = measured(task)
    prior = linear_prior()
    rho = 0.3
    solve("ldps", y, op, prior, steps=STEPS, seed=1, rho=rho)
    a_T, _ = alphas(prior)
    z_T, eps, z0 = first_step(prior)
    W = prior.W.double()
    r = y.flatten(1).double() - z0 @ (A @ W).T
    grad = -rho / a_T.sqrt() * unit(r) @ (A @ W)
    assert torch.allclose(second_latent(prior), ddim_then(prior, z0, eps, grad), atol=1e-5)


@pytest.mark.parametrize("task", ["sr", "gblur", "inpaint_box"])
def test_ldps_step_lowers_the_data_residual(task):
    """A small DC step must bring A D(ẑ₀) closer to y than the same trajectory without it."""
    op, y, _, _ = measured(task)

    def residual(rho):
        prior = linear_prior()
        sol = solve("ldps", y, op, prior, steps=STEPS, seed=1, rho=rho)
        return (y - op.forward(prior.decode(sol.z0))).flatten(1).norm(dim=1)

    assert (residual(0.05) < residual(0.0)).all()


# ---- the pixel proximal step and encoder projection (P2L's other data-consistency step) ---------

@pytest.mark.parametrize("task", ["sr", "gblur", "inpaint_box"])
def test_projection_is_the_closed_form_proximal_point_encoded(task):
    """z* = E(x*), x* = (AᵀA + λI)⁻¹(Aᵀy + λ D(ẑ₀)); with E = D⁻¹, the next ẑ₀ decodes to x*,
    which fits y better than D(ẑ₀) did."""
    op, y, A, _ = measured(task)
    W = near_identity(0)
    prior = LinearPrior(W, torch.linalg.inv(W), linear_prior().eps_of_prompt, linear_prior().C_null)
    lam = 0.1
    sol = solve("p2l_projection_only", y, op, prior, steps=STEPS, seed=1, rho=0.0, lam=lam, cg_iters=60)
    _, _, z0 = first_step(prior)
    x_bar = z0 @ W.double().T
    yf = y.flatten(1).double()
    x_star = torch.linalg.solve(A.T @ A + lam * torch.eye(N, dtype=torch.float64), (yf @ A + lam * x_bar).T).T
    x_next = prior.decode(sol.z0).flatten(1).double()
    assert torch.allclose(x_next, x_star, atol=1e-4)
    assert ((yf - x_next @ A.T).norm(dim=1) < (yf - x_bar @ A.T).norm(dim=1)).all()


# ---- PSLD's gluing term vs GML-DPS --------------------------------------------------------------

def glued_gradient(prior, y, A, P, z0, a_T, omega, gamma):
    """∇_{z_t}[ω‖y − A W ẑ₀‖ + γ‖ẑ₀ − M(P y + (I − P A) W ẑ₀)‖]."""
    W, M, I = prior.W.double(), prior.M.double(), torch.eye(N, dtype=torch.float64)
    yf = y.flatten(1).double()
    r_data = yf - z0 @ (A @ W).T
    G = I - M @ (I - P @ A) @ W
    r_glue = z0 @ G.T - yf @ (M @ P).T
    return (-omega * unit(r_data) @ (A @ W) + gamma * unit(r_glue) @ G) / a_T.sqrt()


def gml_gradient(prior, y, A, z0, a_T, omega, gamma):
    """∇_{z_t}[ω‖y − A W ẑ₀‖ + γ‖ẑ₀ − M W ẑ₀‖]."""
    W, M, I = prior.W.double(), prior.M.double(), torch.eye(N, dtype=torch.float64)
    r_data = y.flatten(1).double() - z0 @ (A @ W).T
    G = I - M @ W
    return (-omega * unit(r_data) @ (A @ W) + gamma * unit(z0 @ G.T) @ G) / a_T.sqrt()


@pytest.mark.parametrize("task", ["sr", "gblur", "inpaint_box"])
def test_psld_gradient_is_that_of_its_glued_objective(task):
    op, y, A, P = measured(task)
    prior = linear_prior()
    omega, gamma = 0.3, 0.5
    solve("psld", y, op, prior, steps=STEPS, seed=1, rho=omega, gamma_glue=gamma)
    a_T, _ = alphas(prior)
    _, eps, z0 = first_step(prior)
    psld = ddim_then(prior, z0, eps, glued_gradient(prior, y, A, P, z0, a_T, omega, gamma))
    gml = ddim_then(prior, z0, eps, gml_gradient(prior, y, A, z0, a_T, omega, gamma))
    assert (psld - gml).abs().max() > 1e-2                  # the two objectives differ here
    assert torch.allclose(second_latent(prior), psld, atol=1e-5)


@pytest.mark.parametrize("task", ["sr", "inpaint_box"])
def test_gml_dps_gradient_is_that_of_its_objective(task):
    op, y, A, _ = measured(task)
    prior = linear_prior()
    omega, gamma = 0.3, 0.5
    solve("gml_dps", y, op, prior, steps=STEPS, seed=1, rho=omega, gamma_gml=gamma)
    a_T, _ = alphas(prior)
    _, eps, z0 = first_step(prior)
    expected = ddim_then(prior, z0, eps, gml_gradient(prior, y, A, z0, a_T, omega, gamma))
    assert torch.allclose(second_latent(prior), expected, atol=1e-5)


# ---- the latent step uses the tuned prompt C*, not C_∅ ------------------------------------------

def latent_step_prompts(calls, K):
    """Per DDIM step the solver calls the denoiser K times to tune C, then once for the latent step."""
    assert len(calls) % (K + 1) == 0
    tuning = [c for i, c in enumerate(calls) if i % (K + 1) < K]
    latent = [c for i, c in enumerate(calls) if i % (K + 1) == K]
    assert all(c["tuning"] for c in tuning) and not any(c["tuning"] for c in latent)
    return tuning, latent


@pytest.mark.parametrize("K", [1, 2])
def test_latent_step_uses_the_tuned_prompt(K):
    op, y, A, _ = measured("sr")
    prior = linear_prior()
    sol = solve("p2l_prompt_only", y, op, prior, steps=STEPS, seed=1, prompt_steps=K, prompt_lr=0.5)
    tuning, latent = latent_step_prompts(prior.calls, K)
    C_null = prior.null_prompt(B)
    assert torch.equal(tuning[0]["C"], C_null)                      # C starts at C_∅ ...
    assert torch.equal(latent[0]["C"], tuning[K]["C"])             # ... the latent step sees the C the update left,
    assert torch.equal(latent[-1]["C"], sol.prompt)                # which warm-starts the next update; last: C*
    assert all((c["C"] - C_null).abs().max() > 1e-3 for c in latent)
    # the returned ẑ₀ is Tweedie's estimate with C*, which fits y better than C_∅'s would
    a = prior.scheduler.alphas_cumprod[latent[-1]["t"]]
    z_t = latent[-1]["z"].flatten(1)
    z0_star = (z_t - (1 - a).sqrt() * prior.eps_of_prompt(sol.prompt)) / a.sqrt()
    z0_null = (z_t - (1 - a).sqrt() * prior.eps_of_prompt(C_null)) / a.sqrt()
    assert torch.allclose(sol.z0.flatten(1), z0_star, atol=1e-5)

    def loss(z0):
        return (y.flatten(1) - z0 @ (A.float() @ prior.W).T).norm(dim=1)

    assert (loss(z0_star) < loss(z0_null)).all()


def test_latent_step_of_the_trained_model_uses_the_tuned_prompt(monkeypatch):
    """The same on the tiny diffusers prior: the UNet's latent-step calls get C*, not C_∅."""
    ldm = tiny_ldm()
    op = build_operator("sr", 16, factor=4)
    y = op.measure(torch.rand(B, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 2 - 1, 0)
    calls, eps = [], ldm.eps

    def recording_eps(z, t, C):
        calls.append({"C": C.detach().clone(), "tuning": C.requires_grad})
        return eps(z, t, C)

    monkeypatch.setattr(ldm, "eps", recording_eps)
    sol = solve("p2l", y, op, ldm, steps=3, seed=0, prompt_lr=0.1)
    tuning, latent = latent_step_prompts(calls, 1)
    assert torch.equal(latent[-1]["C"], sol.prompt)
    assert all(torch.equal(c["C"], nxt["C"]) for c, nxt in zip(latent, tuning[1:]))
    assert all(not torch.allclose(c["C"], ldm.null_prompt(B)) for c in latent)
