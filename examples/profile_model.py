"""Where the time goes: tj.profiler's table for an eager and a traced training step of
the same MLP, and a Chrome trace (open it in Perfetto or chrome://tracing).

Run: python examples/profile_model.py [trace.json]
"""
import os
import sys
import tempfile

import tracejit as tj
from tracejit import nn
from tracejit.profiler import ProfilerActivity, profile, record_function, schedule


def main(trace_path: str | None = None) -> dict:
    tj.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = tj.optim.SGD(model.parameters(), lr=0.01)
    lossf = nn.CrossEntropyLoss()
    x, y = tj.randn(128, 256), tj.randint(0, 10, (128,))

    def step(loss_of):
        opt.zero_grad()
        with record_function("forward"):
            loss = loss_of(x, y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()

    def loss_fn(a, b):
        return lossf(model(a), b)

    traced = tj.trace(loss_fn, (x, y))   # its events are named after it: call loss_fn
    results = {}
    for name, loss_of in (("eager", loss_fn), ("traced", traced)):
        # three warm-up steps (a traced step compiles its kernels at the first call and
        # their threaded twins at the third: the profiler shows those as tracejit::compile
        # events), then three recorded steps
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=3, active=3)) as prof:
            for _ in range(6):
                step(loss_of)
                prof.step()
        events = prof.key_averages()
        width = max(len(e.key) for e in events)   # kernels' file:line in full
        table = events.table(sort_by="self_cpu_time_total", row_limit=12,
                             max_name_column_width=width)
        print(f"== {name} training step (3 steps) ==")
        print(table)
        results[name] = prof
    path = trace_path or os.path.join(tempfile.mkdtemp(), "traced_step.json")
    results["traced"].export_chrome_trace(path)
    print(f"Chrome trace of the traced steps: {path}")
    names = {e.key for e in results["traced"].key_averages()}
    return {"eager": results["eager"], "traced": results["traced"], "trace_path": path,
            "traced_names": names}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
