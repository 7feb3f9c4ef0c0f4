"""L-BFGS with PyTorch's algorithm: a two-loop recursion over the last `history_size`
curvature pairs, a fixed step or a strong-Wolfe line search (cubic interpolation), and
PyTorch's stopping rules. The parameters are handled as one flat numpy vector; the loss
and gradients come from the closure."""
from __future__ import annotations

import math

import numpy as np

from .optimizer import Optimizer
from ..core.modes import enable_grad, no_grad
from ..tensor.creation import tensor


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), within bounds
    (the interval's midpoint when the cubic has none)."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(pos, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step t along d satisfying the strong Wolfe conditions: (loss, gradient, t,
    evaluations). `evaluate(t)` gives the loss and flat gradient at x + t d."""
    d_norm = float(np.abs(d).max())
    f_new, g_new = evaluate(t)
    evals, ls_iter = 1, 0
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    while ls_iter < max_ls:  # bracket a step
        sufficient = not (f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev))
        if sufficient and abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        if not sufficient or gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        step = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                  bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = step
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:  # zoom into the bracket
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1],
                               bracket_f[1], bracket_gtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: move away from it
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS (one parameter group). `step(closure)` runs up to `max_iter` iterations, each
    re-evaluating the loss and gradients through `closure` (which zeroes the gradients,
    computes the loss, calls backward and returns the loss).

    >>> opt = tj.optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    >>> opt.step(closure)
    """

    def __init__(self, params, lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None):
        if lr <= 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector --------------------------------------------
    def _flat_grad(self) -> np.ndarray:
        return np.concatenate([np.zeros(p.numel(), p.dtype.np) if p.grad is None
                               else p.grad.detach().cpu().numpy().reshape(-1)
                               for p in self._params])

    def _flat_params(self) -> np.ndarray:
        return np.concatenate([p.detach().cpu().numpy().reshape(-1) for p in self._params])

    def _set(self, flat: np.ndarray, add: bool) -> None:
        offset = 0
        with no_grad():
            for p in self._params:
                n = p.numel()
                part = tensor(flat[offset:offset + n].reshape(tuple(p.shape)), dtype=p.dtype,
                              device=p.device)
                if add:
                    p.add_(part)
                else:
                    p.copy_(part)
                offset += n

    def _loss(self, closure) -> tuple:
        with enable_grad():
            loss = closure()
        return loss, float(loss)

    def step(self, closure):
        """One optimisation run of up to max_iter iterations; returns the closure's first
        loss."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that reevaluates the model and "
                               "returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history = group["line_search_fn"], group["history_size"]
        if line_search not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        state = self.state.setdefault(self._params[0], {"func_evals": 0, "n_iter": 0})
        orig_loss, loss = self._loss(closure)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = (state.get(k, []) for k in ("old_dirs", "old_stps", "ro"))
        h_diag = state.get("H_diag", 1.0)
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                y, s = flat_grad - prev_flat_grad, d * t
                ys = float(y @ s)
                if ys > 1e-10:  # a curvature pair worth keeping
                    if len(old_dirs) == history:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y), old_stps.append(s), ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                d = self._direction(flat_grad, old_dirs, old_stps, ro, h_diag)
            prev_flat_grad, prev_loss = flat_grad.copy(), loss
            t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 \
                else lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:  # not a descent direction
                break
            ls_evals = 0
            if line_search is not None:
                x = self._flat_params()

                def evaluate(step, x=x, d=d):
                    self._set(d * step, add=True)
                    value = self._loss(closure)[1]
                    grad = self._flat_grad()
                    self._set(x, add=False)
                    return value, grad

                loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad,
                                                             gtd)
                self._set(d * t, add=True)
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                self._set(d * t, add=True)
                opt_cond = False
                if n_iter != max_iter:
                    loss = self._loss(closure)[1]
                    flat_grad = self._flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or opt_cond or \
                    np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _direction(flat_grad, old_dirs, old_stps, ro, h_diag) -> np.ndarray:
        """-H g by the two-loop recursion over the stored pairs."""
        q = -flat_grad
        al = [0.0] * len(old_dirs)
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = float(old_stps[i] @ q) * ro[i]
            q = q - al[i] * old_dirs[i]
        r = q * h_diag
        for i in range(len(old_dirs)):
            be_i = float(old_dirs[i] @ r) * ro[i]
            r = r + (al[i] - be_i) * old_stps[i]
        return r
