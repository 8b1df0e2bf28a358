"""Every notebook in notebooks/ runs top to bottom, and the facts its prose relies on hold on this machine (the
suite executes a sample of them; bench/breadth.sh the others, BREADTH_NOTEBOOKS).

This module executes the notebooks of EXECUTED_BY["test_notebooks"] (tests/_notebooks.py: how, and the ``checks``
cell each notebook ends with) and checks the committed copy of every notebook.
"""

import gzip
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
for _module in ("torchvision", "transformers"):
    pytest.importorskip(_module)

from _notebooks import EXECUTED_BY, NOTEBOOKS, check_runs_without_touching_the_repository  # noqa: E402
from _notebooks import executed, kernel_env  # noqa: E402, F401  (the fixtures)

MAX_NOTEBOOK_BYTES = 1_500_000


def test_all_notebooks_are_covered():
    assert {"resnet", "vit", "llm_decode", "llm_train", "ceilings", "traces"} <= set(NOTEBOOKS)
    executed_by = [name for names in EXECUTED_BY.values() for name in names]
    assert sorted(executed_by) == sorted(NOTEBOOKS)  # each notebook executed by exactly one test module


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_committed_notebook_carries_its_outputs(name):
    """The notebooks read on GitHub without running: every code cell was executed, in order, without errors, and
    the plots are there; the file stays small."""
    path = NOTEBOOKS[name]
    assert path.stat().st_size < MAX_NOTEBOOK_BYTES
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for c in code for o in c.outputs) >= 2


# the suite executes a sample of the notebooks (the CNN, the ceilings and traces; the VLM in its own file);
# bench/breadth.sh executes the others (ViT, LLM decoding and training) and checks their facts
BREADTH_NOTEBOOKS = ("vit", "llm_decode", "llm_train")


@pytest.mark.parametrize("name", [n if n not in BREADTH_NOTEBOOKS else pytest.param(n, marks=pytest.mark.breadth)
                                  for n in EXECUTED_BY["test_notebooks"]])
def test_notebook_runs_without_touching_the_repository(name, executed):
    check_runs_without_touching_the_repository(name, executed)


def test_resnet_facts(executed):
    _, c, _ = executed("resnet")
    # torchvision's published count: 4.09 GMACs per 224x224 image
    assert c["gmacs_per_image"] == pytest.approx(4.09, rel=0.005)
    # convolutions sit right of the ridge; batch norm and ReLU (about 1 and 1/8 FLOP/byte in fp32) left of it
    assert c["conv"]["intensity"] > c["ridge"] and c["conv"]["bound"] == "compute"
    assert c["batch_norm"]["intensity"] < min(2.5, c["ridge"]) and c["batch_norm"]["bound"] == "memory"
    assert c["relu"]["intensity"] < 1 and c["relu"]["bound"] == "memory"
    # backward = two products per forward product, less the first convolution's input gradient
    assert 2.9 < c["train_over_inference_matrix_flops"] < 3.0
    assert c["unknown_ops"] == {}
    # the compiled inference: the same matrix FLOPs, one graph call, its kernels' bytes their buffers' sum, fewer
    # bytes than the eager ops move (batch norm and ReLU fused into one pass)
    assert c["compiled_matrix_flops"] == c["eager_matrix_flops"] > 0 and c["compiled_graph_calls"] == 1
    assert c["compiled_kernels"] > 0 and c["compiled_kernel_bytes"] == c["compiled_kernel_bytes_summed"]
    assert 0 < c["compiled_kernel_bytes"] < c["eager_bytes"]
    # datasheet projection: the faster the matrix units, the lower the attainable MFU of the same op stream
    assert 0 < c["h100_training_mfu_at_most"] < c["a100_training_mfu_at_most"] < 1


@pytest.mark.breadth
def test_vit_facts(executed):
    _, c, _ = executed("vit")
    assert c["gmacs_per_image"] == pytest.approx(17.56, rel=0.005)
    assert c["linear"]["intensity"] > c["ridge"] and c["linear"]["bound"] == "compute"
    assert c["layer_norm"]["intensity"] < min(2.5, c["ridge"]) and c["layer_norm"]["bound"] == "memory"
    # fused attention backward recomputes the scores: a little more than three times the forward work
    assert 3.0 <= c["train_over_inference_matrix_flops"] < 3.15
    assert c["unknown_ops"] == {}
    # the published ordering: ViT-B/16 has a higher intensity and a higher attainable MFU than ResNet-50
    assert c["intensity_batch64"]["ViT-B/16"] > c["intensity_batch64"]["ResNet-50"]
    for phase in ("h100_inference_mfu_at_most", "h100_training_mfu_at_most"):
        assert c[phase]["ViT-B/16"] > c[phase]["ResNet-50"] > 0


@pytest.mark.breadth
def test_llm_decode_facts(executed):
    _, c, _ = executed("llm_decode")
    b1 = c["batch1"]
    # one token per sequence: ~2 FLOPs per weight read, 0.5 FLOP/byte in fp32, 1 in bf16; far below the ridge
    assert b1["intensity"] < c["ridge"] and b1["mm_intensity"] < 1.01 and b1["mm_bound"] == "memory"
    assert b1["flops_rel_diff"] == 0.0  # decode_step_flops is exact
    assert 1.0 <= b1["bytes_over_ideal"] < 1.1  # the ideal step is a lower bound, and close at batch 1
    assert all(c["matrix_flops_exact"]) and len(c["matrix_flops_exact"]) == len(c["batches"])
    # intensity grows with the batch (the weights are shared; the KV cache is not)
    assert all(b > a for a, b in zip(c["intensity"], c["intensity"][1:]))
    assert c["intensity"][-1] > 10 * c["intensity"][0]
    # datasheet prediction without a KV cache: linear in the batch below the ridge (~295 on an H100), flat beyond
    p = c["predicted_h100_context0"]
    assert p["128"] / p["1"] == pytest.approx(128, rel=0.02)
    assert p["2048"] == pytest.approx(p["512"], rel=0.01)
    assert c["predicted_h100_bound_context512"] == ["memory"]


@pytest.mark.breadth
def test_llm_train_facts(executed):
    _, c, _ = executed("llm_train")
    n = len(c["tokens"])
    # counted training matrix FLOPs vs 6PT + attention (causal, recomputed in the fused backward)
    assert len(c["formula_rel_diff"]) == n and max(abs(d) for d in c["formula_rel_diff"]) <= 0.02
    assert max(abs(d) for d in c["meta_full_attention_rel_diff"]) <= 0.02
    # 6PT alone misses the attention term, whose share grows with the sequence length
    six = c["six_pt_only_rel_diff"]
    assert six[0] > 0 and all(b > a for a, b in zip(six, six[1:]))
    assert c["intensity"][-1] > 5 * c["intensity"][0]
    assert c["mm_bound_longest"] == "compute"
    # measured throughput and MFU depend on the machine's load: bench material, not asserted here


def test_ceilings_facts(executed):
    _, c, _ = executed("ceilings")
    cpu = c["cpu"]
    assert cpu["ridge_fp32_dram"] == pytest.approx(cpu["peak_fp32"] / cpu["bandwidth"]["DRAM"], rel=1e-12)
    assert cpu["bandwidth"]["L1"] > cpu["bandwidth"]["DRAM"]
    assert c["h100_ridge_bf16"] == pytest.approx(989e12 / 3.35e12)
    # copy: read and write every element, three times; no FLOPs
    assert c["copy"]["bytes"] == c["copy"]["expected_bytes"] and c["copy"]["flops"] == 0
    assert c["gemm"]["intensity"] > c["ridge"] and c["gemm"]["bound"] == "compute"
    # add: 1 FLOP per 3 elements moved
    itemsize = {"float32": 4, "bfloat16": 2}[c["dtype"]]
    assert c["add"]["intensity"] == pytest.approx(1 / (3 * itemsize)) and c["add"]["bound"] == "memory"
    assert c["gemv"]["intensity"] < 1.01 and c["gemv"]["bound"] == "memory"
    # the fused kernel keeps the scores on chip: higher intensity than the math backend, compute-bound
    assert c["attention_fused"]["intensity"] > 5 * c["attention_math"]["intensity"]
    assert c["attention_fused"]["bound"] == "compute"


TRACES = Path(__file__).parent / "data" / "traces" / "tracelens_h100"


def _trace_events(name):
    return json.loads(gzip.decompress((TRACES / name).read_bytes()))["traceEvents"]


def _gpu_activities(events):
    return [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def _profiler_steps(events):
    return sum(e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation" for e in events)


def test_traces_facts(executed):
    _, c, _ = executed("traces")
    events = _trace_events("gaunernst_bert-small-uncased__1016001.json.gz")
    # the trace has one ProfilerStep: every GPU activity of the file is the step's
    assert _profiler_steps(events) == 1
    gpu = _gpu_activities(events)
    assert c["device"] == "H100 SXM"  # deviceProperties: "NVIDIA H100 80GB HBM3"
    assert c["kernels"] == len(gpu) == 61
    assert c["kernel_time"] == pytest.approx(sum(e["dur"] for e in gpu) * 1e-6, rel=1e-9)  # dur in microseconds
    assert c["parts_time"] == pytest.approx(c["kernel_time"], rel=1e-9)
    assert c["attributed_share"] >= 0.99
    assert c["unattributed_time"] == 0 and c["unattributed"] == {} and c["unknown_ops"] == {}
    # every aten::addmm of the trace: Input Dims [bias], [M, K], [K, N]; 2 x M x N x K matrix FLOPs each
    addmm = [e["args"]["Input Dims"] for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm"]
    assert c["addmm_calls"] == len(addmm) == 26
    assert c["addmm_matrix_flops"] == sum(2 * m * k * n for _, (m, k), (_, n), *_ in addmm)
    # the LM head: 141 tokens x 512 features -> 30522 logits; the bias add is one vector FLOP per output element
    assert c["lm_head"] == {"matrix_flops": 2 * 141 * 512 * 30522, "vector_flops": 141 * 30522}
    # every op is memory-bound on both devices, so the projected roofline time scales with the datasheet HBM
    # bandwidths: H100 SXM 3.35 TB/s, B200 8 TB/s
    assert c["roofline_time_b200"] / c["roofline_time_h100"] == pytest.approx(3.35 / 8.0, rel=0.01)
    # a roofline time is at least the matrix FLOPs at the bf16 tensor-core peak (989 TFLOP/s on the H100 SXM)
    assert c["roofline_time_h100"] > c["addmm_matrix_flops"] / 989e12
    # the measured kernels are far from their roofs (small GEMMs of 141 rows): well over the roofline time
    assert c["kernel_time"] > 5 * c["roofline_time_h100"]

    # Qwen1.5-0.5B: one ProfilerStep; the file's GPU time (dur in microseconds) is the step's kernel time plus the
    # work queued before the first recorded launch, nothing outside the step
    q = c["qwen"]
    events = _trace_events("Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    assert _profiler_steps(events) == 1 and q["outside_step_time"] == 0
    gpu_time = sum(e["dur"] for e in _gpu_activities(events)) * 1e-6
    assert q["before_trace_time"] > 0
    assert q["kernel_time"] + q["before_trace_time"] == pytest.approx(gpu_time, rel=1e-9)
    assert q["attributed_share"] >= 0.99
    # every aten::mm: Input Dims [M, K], [K, N]; 2 x M x N x K each
    mm = [e["args"]["Input Dims"] for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm"]
    assert q["mm_calls"] == len(mm) == 96
    assert q["mm_matrix_flops"] == sum(2 * m * k * n for (m, k), (_, n) in mm)
    # each shape's bf16 intensity, 2MKN FLOPs over 2 bytes x (MK + KN + MN) elements, is right of the H100 SXM's
    # bf16 ridge (989 TFLOP/s / 3.35 TB/s = 295 FLOP/byte): every mm compute-bound
    assert min(2 * m * k * n / (2 * (m * k + k * n + m * n)) for (m, k), (_, n) in mm) > 989e12 / 3.35e12
    assert q["mm_bounds"] == ["compute"]
