"""Custom autograd Functions: a ReLU, and a thresholded ReLU whose gradient is halved
above the threshold. Both are checked against finite differences / the rule itself.
(tj.trace does not capture a custom Function that records gradients: a traced function
calling one runs eagerly, with a warning naming the line.)"""
import tracejit as tj


class MyReLU(tj.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0)


class HalfGradAbove(tj.autograd.Function):
    """y = relu(x); dy/dx is 1 on (0, threshold] and 0.5 above it (a custom rule)."""

    @staticmethod
    def forward(ctx, x, threshold):
        ctx.save_for_backward(x)
        ctx.threshold = threshold
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        scale = tj.where(x > ctx.threshold, 0.5, 1.0) * (x > 0)
        return grad * scale, None


def main() -> dict:
    x = tj.tensor([-1.0, 0.5, 1.5, 3.0], dtype=tj.float64, requires_grad=True)
    ok = tj.autograd.gradcheck(MyReLU.apply, (x,))
    y = HalfGradAbove.apply(x, 1.0)
    y.sum().backward()
    print(f"MyReLU passes gradcheck: {ok}")
    print(f"HalfGradAbove(threshold=1) on {x.detach().tolist()}: grad {x.grad.tolist()}")
    return {"gradcheck": ok, "grad": x.grad.tolist()}


if __name__ == "__main__":
    main()
