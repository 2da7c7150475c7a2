import os, sys, warnings
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.insert(0, os.getcwd())
import torch
exec(open(".whl/diag.py").read().split("sizes = Sizes")[0].replace('dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"', 'dev = "cuda"'))
sizes = Sizes(32, 128, 128, 3, 1)
m = MODELS["convnet"]; net = convnet.build({"model": m.run_spec(sizes), "device": dev})
g = torch.Generator().manual_seed(0)
x = torch.randn(m.inputs(sizes), generator=g).to(dev); target = torch.randn(m.targets(sizes), generator=g).to(dev)
for det in (False, True):
    torch.use_deterministic_algorithms(det, warn_only=False)
    for ac in (False, True):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            runs = []
            for _ in range(3):
                net.zero_grad(); runs.append(step(convnet, net, x, target, ac))
            print(f"convnet deterministic={det} autocast={ac}: 3 runs bitwise equal: {all(all(torch.equal(a, b) for a, b in zip(runs[0], r)) for r in runs[1:])}; warnings: {[str(i.message)[:120] for i in w][:3]}", flush=True)
torch.use_deterministic_algorithms(False)
print("allow_fp16_bf16_reduction_math_sdp:", getattr(torch.backends.cuda, "fp16_bf16_reduction_math_sdp_allowed", lambda: "n/a")(),
      "flash", torch.backends.cuda.flash_sdp_enabled(), "mem_eff", torch.backends.cuda.mem_efficient_sdp_enabled(), "math", torch.backends.cuda.math_sdp_enabled(), flush=True)
from torch.nn.attention import sdpa_kernel, SDPBackend
m = MODELS["transformer"]; net = transformer.build({"model": m.run_spec(sizes), "device": dev})
x = torch.randint(1, TRANSFORMER["VOCAB"], m.inputs(sizes), generator=g).float(); x[:, -2:] = 0; x = x.to(dev)
t = torch.zeros(m.targets(sizes)); t[:, 0] = torch.randint(0, TRANSFORMER["CLASSES"], (sizes.batch_size,), generator=g)
t[:, 1:] = torch.softmax(torch.randn(sizes.batch_size, TRANSFORMER["CLASSES"], generator=g), -1); target = t.to(dev)
for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel([backend]):
                log = Log()
                with log:
                    step(transformer, net, x, target, True)
            print(f"transformer only {backend.name}: ran; ops {sorted(set(log.seen))}", flush=True)
        except Exception as e:
            print(f"transformer only {backend.name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        print("   warnings:", [str(i.message)[:400] for i in w][:6], flush=True)
    net.zero_grad()
