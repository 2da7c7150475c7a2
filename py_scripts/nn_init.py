"""Every nn_init case in PyTorch: the twin of ``r_scripts/nn_init.R`` (same names, same order).

``python -m py_scripts.nn_init CASES_JSON OUT_SAFETENSORS``: reads the cases (:mod:`harness.contract.nn_init`, written by
``python -m harness inits``), runs each after the same manual seed on a fresh ``empty`` tensor of its shape and dtype,
and writes the initialised tensors under the cases' ids; a case the binding refuses is written as its error, in its own
words, in the file's metadata (``errors``: a JSON object by case id), with the binding's versions (``versions``).
``calculate_gain`` returns a number: written as a one-element float64 tensor. A case may name ``switches`` (the
explanations' proofs, :mod:`harness.judge.init_parity`): each computes the case as R torch does, in PyTorch, and is
written beside it as ``<id> @switch``; R has no twin of them (it computes as it does).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import torch
from safetensors.torch import save_file


def init_function(name: str) -> Any:
    """PyTorch's ``torch.nn.init.<name>``."""
    return getattr(torch.nn.init, name)


def run_case(case: dict[str, Any], seed: int) -> torch.Tensor:
    """One case's result: the tensor it initialised (a number as a one-element float64 tensor). Raises what PyTorch raises."""
    torch.manual_seed(seed)
    function = init_function(case["function"])
    if case["shape"] is None:
        return torch.tensor([function(**case["options"])], dtype=torch.float64)
    tensor = torch.empty(case["shape"], dtype=getattr(torch, case["dtype"]))
    function(tensor, **case["options"])
    return tensor


def error_text(err: BaseException) -> str:
    """The error's first line, as the binding wrote it."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def orthogonal_in_float32(case: dict[str, Any], seed: int, data: dict[str, Any]) -> torch.Tensor:
    """Switch: orthogonal_ as R torch computes it: its Gaussian matrix drawn by ``torch_randn(rows, cols)``, in the
    default dtype (float32), then copied into the tensor (R/nn-init.R nn_init_orthogonal_)."""
    torch.manual_seed(seed)
    tensor = torch.empty(case["shape"], dtype=torch.float32)
    torch.nn.init.orthogonal_(tensor, **case["options"])
    return tensor.to(getattr(torch, case["dtype"]))


def trunc_normal_by_inverse_cdf(case: dict[str, Any], seed: int, data: dict[str, Any]) -> torch.Tensor:
    """Switch: trunc_normal_ as R torch computes it (R/nn-init.R nn_init_no_grad_trunc_normal): a uniform draw between
    the bounds' CDF values mapped to [-1, 1], erfinv_, scaled by std·√2, shifted by the mean, clamped to [a, b]. The CDF
    values are R's ``stats::pnorm``'s, from ``data["pnorm"]`` (exact, by the standardised bound's repr)."""
    options = {"mean": 0.0, "std": 1.0, "a": -2.0, "b": 2.0, **case["options"]}
    mean, std, a, b = (float(options[k]) for k in ("mean", "std", "a", "b"))

    def norm_cdf(x: float) -> float:
        return float.fromhex(data["pnorm"][repr(x)])

    torch.manual_seed(seed)
    tensor = torch.empty(case["shape"], dtype=getattr(torch, case["dtype"]))
    low, high = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    tensor.uniform_(2 * low - 1, 2 * high - 1)
    tensor.erfinv_()
    tensor.mul_(std * math.sqrt(2.0))
    tensor.add_(mean)
    return tensor.clamp_(min=a, max=b)


#: The switches an explanation names (harness/judge/init_parity.py): each computes a case as R torch does.
SWITCHES = {"orthogonal_in_float32": orthogonal_in_float32, "trunc_normal_by_inverse_cdf": trunc_normal_by_inverse_cdf}


def write_init_cases(cases_path: str, out_path: str) -> None:
    """Run every case of ``cases_path`` and write the results and errors to ``out_path``."""
    with open(cases_path, encoding="utf-8") as handle:
        declared = json.load(handle)
    tensors: dict[str, torch.Tensor] = {}
    errors: dict[str, str] = {}
    for case in declared["cases"]:
        try:
            tensors[case["id"]] = run_case(case, declared["seed"]).contiguous()
        except Exception as err:  # the binding's refusal is the case's result
            errors[case["id"]] = error_text(err)
        for switch in case.get("switches", []):  # Python-only: the explanations' proofs (R computes as R does)
            tensors[f"{case['id']} @switch"] = SWITCHES[switch["name"]](case, declared["seed"], switch["data"]).contiguous()
    versions = {"binding": f"PyTorch {torch.__version__}", "libtorch": torch.__version__.split("+")[0]}
    save_file(tensors, out_path, metadata={"errors": json.dumps(errors), "versions": json.dumps(versions)})


if __name__ == "__main__":
    write_init_cases(sys.argv[1], sys.argv[2])
