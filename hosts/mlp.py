"""A small multi-layer perceptron in numpy, with its parameters in one flat float32 vector.

Example:
    >>> import numpy as np
    >>> m = MLP((64, 32, 10), seed=0)
    >>> m.theta.size == 64 * 32 + 32 + 32 * 10 + 10
    True
    >>> x, y = np.zeros((3, 64), np.float32), np.array([0, 1, 2])
    >>> loss, g = m.loss_and_grad(x, y, denom=3)
    >>> g.shape == m.theta.shape and g.dtype == np.float32
    True

Layers are dense with ReLU between them and softmax cross-entropy on the output. The
parameters live in ``theta`` (the weight matrices and biases are views into it), so a
data-parallel step is: flat gradient -> all-reduce -> one in-place update of ``theta``.

``MODELS`` names the two sizes the experiments train (``--model``): ``small``, 2,410
parameters whose all-reduce is a few dozen packets (round trips and per-packet costs set an
iteration's time), and ``large``, two hidden layers of 1,024 (1,126,410 parameters, ~35,000
packets of 32 values per worker per iteration: the links' bandwidth sets it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Hidden layer widths of each model on the digits data (64 inputs, 10 classes).
MODELS: dict[str, tuple[int, ...]] = {"small": (32,), "large": (1024, 1024)}
DIGITS_IN, DIGITS_OUT = 64, 10


def layer_sizes(model: str, inputs: int = DIGITS_IN, classes: int = DIGITS_OUT) -> tuple[int, ...]:
    """Every layer's width of ``model`` (a key of ``MODELS``), input and output included.

    >>> layer_sizes("small")
    (64, 32, 10)
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
    return (inputs, *MODELS[model], classes)


def parameter_count(sizes: Sequence[int]) -> int:
    """Weights and biases of a dense network with these layer widths.

    >>> parameter_count(layer_sizes("small")), parameter_count(layer_sizes("large"))
    (2410, 1126410)
    """
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:], strict=False))


class MLP:
    """Dense ReLU network; ``loss_and_grad`` returns the gradient of the summed loss / denom."""

    def __init__(self, sizes: Sequence[int] = (64, 32, 10), seed: int = 0) -> None:
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"need at least an input and an output layer, got {sizes}")
        self.sizes = tuple(sizes)
        shapes = [(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        total = sum(a * b + b for a, b in shapes)
        self.theta = np.zeros(total, dtype=np.float32)
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        at = 0
        for a, b in shapes:
            self.weights.append(self.theta[at : at + a * b].reshape(a, b))
            at += a * b
            self.biases.append(self.theta[at : at + b])
            at += b
        rng = np.random.default_rng(seed)
        for w in self.weights:
            # He initialisation suits ReLU layers.
            w[...] = rng.normal(0.0, np.sqrt(2.0 / w.shape[0]), size=w.shape)

    def _forward(self, x: np.ndarray) -> list[np.ndarray]:
        acts = [np.asarray(x, dtype=np.float32)]
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0.0) if i < len(self.weights) - 1 else z)
        return acts

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self._forward(x)[-1]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(x), axis=1)

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(x) == y))

    def loss_and_grad(self, x: np.ndarray, y: np.ndarray, denom: float) -> tuple[float, np.ndarray]:
        """(sum of cross-entropy losses / denom, its gradient as a flat float32 vector).

        A worker holding part of a mini-batch passes the global batch size as ``denom``,
        so that the sum of all workers' gradients is the gradient of the batch mean.
        """
        acts = self._forward(x)
        z = acts[-1] - acts[-1].max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss = float(-np.log(np.maximum(p[rows, y], 1e-12)).sum() / denom)
        delta = p
        delta[rows, y] -= 1.0
        delta /= denom
        grad = np.zeros_like(self.theta)
        gw, gb = self._grad_views(grad)
        for i in range(len(self.weights) - 1, -1, -1):
            gw[i][...] = acts[i].T @ delta
            gb[i][...] = delta.sum(axis=0)
            if i:
                delta = (delta @ self.weights[i].T) * (acts[i] > 0)
        return loss, grad

    def _grad_views(self, grad: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        gw, gb, at = [], [], 0
        for w in self.weights:
            a, b = w.shape
            gw.append(grad[at : at + a * b].reshape(a, b))
            at += a * b
            gb.append(grad[at : at + b])
            at += b
        return gw, gb


#: The regime each model's iterations are in, for the tables that measure it.
REGIME = {"small": "round-trip-bound", "large": "bandwidth-bound"}


def describe_model(model: str) -> str:
    """One phrase for a table's title.

    >>> describe_model("large")
    'large model (1,126,410 parameters, bandwidth-bound)'
    """
    n = parameter_count(layer_sizes(model))
    return f"{model} model ({n:,} parameters, {REGIME[model]})"
