"""Device diagnostics for the models on CUDA (prepared on CPU; run by the device tool)."""
import faulthandler, os, sys, time, traceback
sys.path.insert(0, os.getcwd())
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from harness.contract.models import GRU, TRANSFORMER, CONVNET, MODELS, Sizes
from py_scripts.models import gru, convnet, transformer

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
amp = torch.float16 if dev == "cuda" else torch.bfloat16
faulthandler.dump_traceback_later(45, repeat=True, file=sys.stdout)
print(torch.__version__, dev, torch.backends.cudnn.version() if dev == "cuda" else "", flush=True)

def sync():
    if dev == "cuda":
        torch.cuda.synchronize()

def timed(label, fn):
    sync(); t = time.perf_counter()
    try:
        r = fn(); sync(); print(f"{label}: {time.perf_counter() - t:.3f} s", flush=True); return r
    except Exception as e:
        print(f"{label}: {type(e).__name__}: {str(e)[:300]}", flush=True)

class Log(TorchDispatchMode):
    def __init__(self):
        super().__init__(); self.seen = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if any(k in name for k in ("mm", "matmul", "attention", "linear", "conv")):
            self.seen.append((name, tuple(str(a.dtype).replace("torch.", "") for a in args if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))

def step(mod, net, x, target, autocast):
    with torch.autocast(dev, dtype=amp, enabled=autocast):
        out = mod.forward(net, x, 0, -1, None)
        loss = mod.loss(out, target) if hasattr(mod, "loss") else ((out.float() - target) ** 2).mean()
    loss.backward()
    return [p.grad.clone() for p in net.parameters()]

sizes = Sizes(32, 128, 128, 3, 1)
for name, mod, dims in (("convnet", convnet, CONVNET), ("transformer", transformer, TRANSFORMER), ("gru", gru, GRU)):
    m = MODELS[name]
    spec = {"model": m.run_spec(sizes), "device": dev}
    net = timed(f"{name} build", lambda: mod.build(spec))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(m.inputs(sizes), generator=g).to(dev)
    if name == "transformer":
        x = torch.randint(1, dims["VOCAB"], m.inputs(sizes), generator=g).float(); x[:, -2:] = 0; x = x.to(dev)
        t = torch.zeros(m.targets(sizes)); t[:, 0] = torch.randint(0, dims["CLASSES"], (sizes.batch_size,), generator=g)
        t[:, 1:] = torch.softmax(torch.randn(sizes.batch_size, dims["CLASSES"], generator=g), -1); target = t.to(dev)
    else:
        target = torch.randn(m.targets(sizes), generator=g).to(dev)
    for autocast in (False, True):
        a = timed(f"{name} step autocast={autocast} #1", lambda: step(mod, net, x, target, autocast))
        net.zero_grad(); b = timed(f"{name} step autocast={autocast} #2", lambda: step(mod, net, x, target, autocast))
        net.zero_grad()
        if a and b:
            print(f"{name} autocast={autocast} grads bitwise equal run to run: {all(torch.equal(u, v) for u, v in zip(a, b))}", flush=True)
    log = Log()
    with log:
        step(mod, net, x, target, True)
    net.zero_grad()
    print(f"{name} autocast GEMM-like ops (after autocast): {sorted(set(log.seen))}", flush=True)
    if dev == "cuda":
        torch.use_deterministic_algorithms(True)
        timed(f"{name} step with use_deterministic_algorithms(True)", lambda: step(mod, net, x, target, False))
        torch.use_deterministic_algorithms(False)
        net.zero_grad()
print("done", flush=True)
