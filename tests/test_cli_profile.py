"""`python -m roofline profile`: steady state by default, the model sources (torchvision, timm, a script path),
--dtype / --autocast / --attention, --warmup / --repeat, --decode --kv-len, and every option checked before
anything is built or run."""

import errno
import json
import os
import stat
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import cli  # noqa: E402

CALLS = []  # every call of a builder below, so a test can tell that nothing ran


def tiny_adam(device, batch, seq, train):
    """A user callable: a small MLP and, with train, an AdamW step."""
    CALLS.append((device, batch, seq, train))
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device)
    x = torch.randn(batch or 4, 32, device=device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)

    def step():
        if train:
            m(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                m(x)

    return m, step


def _run(argv, capsys):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _ops(path):
    r = roofline.load(path)
    return r, {n: v["calls"] for n, v in r.by_op().items()}


@pytest.fixture(autouse=True)
def _clear():
    CALLS.clear()
    yield


def test_default_warms_up_and_says_so(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--train", "--timing", "model",
                         "--ceilings", "datasheet", "--json", str(js)], capsys)
    assert rc == 0, err
    assert "1 warm-up step uncounted, then median of 3 measured steps" in err
    assert "steady state: 1 warm-up step uncounted, median of 3 measured steps" in out
    r, ops = _ops(js)
    assert "aten.zeros_like.default" not in ops  # AdamW's state was created in the warm-up step
    assert r.meta["steady"]["repeat"] == 3 and r.meta["steady"]["wall_times"][0] > 0


def test_warmup_0_measures_and_labels_the_first_step(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--train", "--warmup", "0", "--repeat", "1",
                         "--timing", "none", "--ceilings", "datasheet", "--json", str(js)], capsys)
    assert rc == 0, err
    assert "the first step is measured" in err and "the FIRST step is measured" in out
    assert _ops(js)[1]["aten.zeros_like.default"] == 8  # exp_avg and exp_avg_sq of 4 parameters


def test_gpt2_train_measured_step_has_no_optimizer_state_creation(tmp_path, capsys):
    """`profile gpt2 --train` with its default warm-up reports a step without AdamW's state creation. Counted on
    meta (the same steps, warm-up and AdamW as on the CPU, in seconds instead of a minute on a small machine);
    tests/test_steady.py checks the same on the CPU with a small model."""
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "gpt2", "--train", "--device", "meta", "--seq", "32", "--json", str(js)], capsys)
    assert rc == 0, err
    assert "1 warm-up step uncounted" in err
    r, ops = _ops(js)
    assert "aten.zeros_like.default" not in ops
    opt = r.by_op("optimizer")
    assert opt and not [n for n in opt if n.startswith(("aten.zeros", "aten.scalar_tensor", "aten.empty",
                                                        "aten.lift_fresh"))]
    # and the same run without the warm-up has them: the check can fail
    rc, out, err = _run(["profile", "gpt2", "--train", "--device", "meta", "--seq", "32", "--warmup", "0",
                         "--json", str(js)], capsys)
    assert rc == 0
    # AdamW creates exp_avg and exp_avg_sq for each of GPT-2's 148 parameter tensors (the LM head is tied)
    assert roofline.load(js).by_op()["aten.zeros_like.default"]["calls"] == 2 * 148
    assert "aten._foreach_add_.Scalar" in opt or "aten.add_.Tensor" in opt or "aten.addcdiv_.default" in opt


def test_dtype_builds_the_model_in_that_dtype(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--dtype", "bf16", "--repeat", "1",
                         "--timing", "none", "--ceilings", "datasheet", "--json", str(js)], capsys)
    assert rc == 0, err
    assert "in bfloat16" in err
    r = roofline.load(js)
    mat = r.records[r.records["matrix_flops"] > 0]
    assert {r.dtype_names[c] for c in mat["dtype"].tolist()} == {"bfloat16"}
    assert torch.get_default_dtype() == torch.float32  # restored


def test_autocast_runs_products_in_the_autocast_dtype(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--autocast", "bfloat16", "--repeat", "1",
                         "--timing", "none", "--ceilings", "datasheet", "--json", str(js)], capsys)
    assert rc == 0, err
    assert "autocast bfloat16" in err
    r = roofline.load(js)
    mat = r.records[r.records["matrix_flops"] > 0]
    assert {r.dtype_names[c] for c in mat["dtype"].tolist()} == {"bfloat16"}


def test_script_path_callable(tmp_path, capsys):
    script = tmp_path / "mymodel.py"
    script.write_text("import torch\n\n\ndef build(device, batch, seq, train):\n"
                      "    m = torch.nn.Linear(16, 16).to(device)\n"
                      "    x = torch.randn(batch or 2, 16, device=device)\n"
                      "    return m, lambda: m(x)\n")
    rc, out, err = _run(["profile", f"{script}:build", "--repeat", "2", "--timing", "none",
                         "--ceilings", "datasheet"], capsys)
    assert rc == 0, err
    assert "aten.addmm.default" in out


def test_torchvision_name_on_meta_projected(capsys):
    pytest.importorskip("torchvision")
    rc, out, err = _run(["profile", "mobilenet_v3_small", "--device", "meta", "--batch", "1",
                         "--project", "H100 SXM", "--top", "3"], capsys)
    assert rc == 0, err
    assert "model built in bfloat16" in err and "projected onto H100 SXM" in out
    assert "aten.convolution.default" in out


def test_timm_name_on_meta(tmp_path, capsys):
    pytest.importorskip("timm")
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "test_vit", "--device", "meta", "--batch", "1", "--top", "3", "--json", str(js)],
                        capsys)
    assert rc == 0, err
    assert "attention counted as flash" in err
    r = roofline.load(js)
    assert "aten._scaled_dot_product_flash_attention.default" in r.op_names
    assert r.meta["attention"]["calls"].get("flash", 0) >= 1
    assert not any(n.startswith("aten.bmm") for n in r.op_names)  # no score matrix: the math path did not run


def test_meta_attention_and_dtype_can_be_chosen(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "llama", "--device", "meta", "--seq", "64", "--attention", "math",
                         "--dtype", "float32", "--json", str(js)], capsys)
    assert rc == 0, err
    r = roofline.load(js)
    assert r.meta["attention"]["backend"] == "math"
    assert not any("_scaled_dot_product" in n for n in r.op_names)


def test_decode_on_meta_prints_tokens_per_second_against_the_bandwidth_roof(capsys):
    rc, out, err = _run(["profile", "gpt2", "--device", "meta", "--decode", "--kv-len", "32", "--batch", "2",
                         "--project", "H100 SXM"], capsys)
    assert rc == 0, err
    assert "decode step (KV cache of 32 tokens)" in err
    assert "decode: 2 new tokens per step against a KV cache of 32 tokens" in out
    assert "bytes per token" in out and "bandwidth roof" in out and "tokens/s" in out


def test_decode_on_cpu_measures_tokens_per_second(capsys):
    rc, out, err = _run(["profile", "gpt2", "--decode", "--kv-len", "8", "--repeat", "2", "--timing", "model",
                         "--ceilings", "H100 SXM"], capsys)
    assert rc == 0, err
    line = [x for x in out.splitlines() if x.strip().startswith("measured:")]
    assert line and "tokens/s" in line[0] and "of the roof" in line[0]


# ---- every option is checked before anything runs -----------------------------------------------------------

BAD = [
    (["--plot", "{tmp}/out.txt"], "extension must be one of .png, .svg, .pdf"),
    (["--plot", "{tmp}/no/such/dir/out.png"], "does not exist"),
    (["--json", "{tmp}/no/such/dir/r.json"], "does not exist"),
    (["--json", "{tmp}"], "is a folder"),
    (["--json", "/proc/roofline-out.json"], "not writable"),  # root may write anywhere but /proc takes no file
    (["--json", ""], "--json: the file name is empty"),
    (["--device", "tpu"], "expected cpu, cuda, cuda:N or meta"),
    (["--device", "cuda:99"], "--device cuda:99"),
    (["--project", "H100"], "--project"),
    (["--ceilings", "No Such GPU"], "--ceilings"),
    (["--dtype", "int3"], "--dtype 'int3'"),
    (["--autocast", "float64"], "--autocast 'float64'"),
    (["--autocast", "bf16", "--device", "meta"], "--autocast does not apply on meta"),
    (["--attention", "flash"], "--attention chooses the kernel counted on --device meta"),
    (["--warmup", "-1"], "--warmup must be >= 0"),
    (["--repeat", "0"], "--repeat must be >= 1"),
    (["--batch", "0"], "--batch must be >= 1"),
    (["--top", "0"], "--top must be >= 1"),
    (["--by-module", "0"], "--by-module must be >= 1"),
    (["--kv-len", "8"], "--kv-len is for --decode"),
    (["--decode", "--kv-len", "8"], "--decode needs a language model"),
    (["--plot", "{tmp}/x.png", "--device", "meta"], "--plot on meta needs --project"),
]


@pytest.mark.parametrize("extra, message", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_invalid_option_fails_before_anything_runs(extra, message, tmp_path, capsys):
    if extra[:2] == ["--device", "cuda:99"] and not torch.cuda.is_available():
        message = "CUDA is not available"
    argv = ["profile", "test_cli_profile:tiny_adam", "--train"] + [a.format(tmp=tmp_path) for a in extra]
    rc, out, err = _run(argv, capsys)
    assert rc == 1
    assert message in err
    assert "profiling" not in err and out == ""
    assert CALLS == []  # the model was never built
    assert not os.path.exists(tmp_path / "out.txt") and not os.path.exists(tmp_path / "x.png")


@pytest.mark.parametrize("argv, message", [
    (["gpt2", "--decode"], "--decode needs --kv-len"),
    (["gpt2", "--decode", "--kv-len", "8", "--train"], "--decode measures inference"),
    (["gpt2", "--decode", "--kv-len", "1024"], "gpt2 has 1024 positions"),
    (["gpt2", "--seq", "2000"], "gpt2 has 1024 positions"),
    (["gtp2"], "did you mean 'gpt2'"),
    (["resnet5O"], "did you mean 'resnet50'"),
    (["no_such_module:f"], "cannot import 'no_such_module'"),
    (["test_cli_profile:nothing"], "has no attribute 'nothing'"),
    (["{tmp}/missing.py:build"], "no such file"),
])
def test_invalid_model_or_mode_fails_before_anything_runs(argv, message, tmp_path, capsys, monkeypatch):
    import roofline._profile_cmd as pc

    built = []
    monkeypatch.setattr(pc, "build", lambda *a: built.append(a))
    rc, out, err = _run(["profile"] + [a.format(tmp=tmp_path) for a in argv], capsys)
    assert rc == 1 and message in err
    assert built == [] and "profiling" not in err


def test_a_bad_choice_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["profile", "test_cli_profile:tiny_adam", "--attention", "flash9"])
    assert e.value.code == 2
    assert CALLS == []


def test_a_broken_script_is_reported_without_running(tmp_path, capsys):
    script = tmp_path / "broken.py"
    script.write_text("raise ImportError('missing dependency xyz')\n")
    rc, out, err = _run(["profile", f"{script}:build"], capsys)
    assert rc == 1 and "missing dependency xyz" in err
    assert not [m for m in sys.modules if m.startswith("_roofline_user_broken")]


def test_help_lists_the_new_options():
    text = cli.build_parser()._subparsers._group_actions[0].choices["profile"].format_help()
    for opt in ("--dtype", "--autocast", "--attention", "--warmup", "--repeat", "--decode", "--kv-len"):
        assert opt in text


def test_options_json_written_only_after_success(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--repeat", "1", "--timing", "none",
                         "--ceilings", "datasheet", "--json", str(js)], capsys)
    assert rc == 0 and json.loads(js.read_text())["n_records"] > 0


def test_output_check_leaves_no_trace(tmp_path):
    from roofline._profile_cmd import check_output

    new = tmp_path / "r.json"
    check_output("--json", str(new))
    assert not new.exists()  # made to test it, removed again
    old = tmp_path / "old.json"
    old.write_text("kept")
    check_output("--json", str(old))
    assert old.read_text() == "kept"


# ---- output files: the early check touches nothing, the report reaches a FIFO or a link's target ----------------

META = ["--device", "meta", "--timing", "none"]  # counts only: nothing runs, no ceilings are measured


def test_json_to_a_fifo_reaches_a_reader_waiting_on_it(tmp_path, capsys):
    """The early check must not open the FIFO: that would give the waiting reader its end of file, and the final
    write would then block for want of a reader. A watchdog releases such a blocked write, so a regression fails
    instead of hanging."""
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got, done = [], threading.Event()

    def reader():
        with open(fifo, "rb") as f:
            got.append(f.read())

    def watchdog():
        t.join()
        if not done.wait(60):  # the command still waits for a reader: give it one
            with open(fifo, "rb") as f:
                f.read()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        rc, out, err = _run(["profile", "test_cli_profile:tiny_adam"] + META + ["--json", str(fifo)], capsys)
    finally:
        done.set()
        t.join(timeout=5)  # after the command's write and close the reader returns at once
        if t.is_alive():  # the command failed before writing: release the reader still waiting to open
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as e:  # ENXIO: no reader has it open (it returned meanwhile): nothing to release
                if e.errno != errno.ENXIO:
                    raise
    t.join(timeout=60)
    assert rc == 0, err
    assert len(got) == 1 and roofline.Report.from_dict(json.loads(got[0])).records.size > 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["report.fifo"]


def test_json_to_a_dangling_symlink_writes_its_target_and_keeps_the_link(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    link, target = tmp_path / "latest.json", tmp_path / "runs" / "r1.json"
    os.symlink(target, link)
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam"] + META + ["--json", str(link)], capsys)
    assert rc == 0, err
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert roofline.load(str(target)).records.size > 0
    assert os.listdir(tmp_path / "runs") == ["r1.json"]


def test_output_check_leaves_a_dangling_symlink_alone(tmp_path):
    from roofline._profile_cmd import check_output

    link = tmp_path / "r.json"
    os.symlink(tmp_path / "target.json", link)
    check_output("--json", str(link))
    assert os.path.islink(link) and not (tmp_path / "target.json").exists()


def test_json_dash_is_stdout_and_the_tables_go_to_stderr(capsys):
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam"] + META + ["--json", "-"], capsys)
    assert rc == 0, err
    assert roofline.Report.from_dict(json.loads(out)).records.size > 0  # stdout is the JSON alone
    assert "aten.addmm" in err and not os.path.exists("-")


def test_plot_dash_is_refused_before_anything_runs(capsys):
    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--plot", "-"], capsys)
    assert rc == 1 and "--plot -: a chart is not written to stdout" in err and CALLS == []


# ---- a user's exception: its type and where in the user's file ------------------------------------------------

USER_SCRIPT = """\
import torch


def lookup(cfg):
    return cfg["hidden_size"]


def build(device, batch, seq, train):
    width = lookup({})
    return None, lambda: width


def build_ok(device, batch, seq, train):
    def step():
        torch.ones(2, device=device) / 0
        {}["in_step"]

    return None, step
"""


def _line(text, needle):
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_users_exception_names_its_type_and_the_line_in_the_users_file(tmp_path, capsys):
    script = tmp_path / "mymodel.py"
    script.write_text(USER_SCRIPT)
    rc, out, err = _run(["profile", f"{script}:build"] + META, capsys)
    assert rc == 1
    assert "roofline profile: error: KeyError: 'hidden_size'" in err
    assert f"at {script}:{_line(USER_SCRIPT, 'cfg[')}, in lookup" in err  # the innermost frame in the file


def test_a_users_exception_in_the_step_is_located_too(tmp_path, capsys):
    script = tmp_path / "mymodel.py"
    script.write_text(USER_SCRIPT)
    rc, out, err = _run(["profile", f"{script}:build_ok"] + META, capsys)
    assert rc == 1
    assert "KeyError: 'in_step'" in err and f"at {script}:{_line(USER_SCRIPT, 'in_step')}, in step" in err


def test_an_exception_while_importing_the_users_file_is_located(tmp_path, capsys):
    script = tmp_path / "broken_cfg.py"
    script.write_text("CONFIG = {}\nWIDTH = CONFIG['width']\n")
    rc, out, err = _run(["profile", f"{script}:build"], capsys)
    assert rc == 1 and "KeyError: 'width'" in err and f"at {script}:2, in <module>" in err


# ---- names checked before heavy imports; devices; --traceback ----


def test_a_misspelled_model_is_rejected_before_torch_torchvision_or_timm_is_imported(tmp_path):
    """The mechanism behind a fast rejection: the names are read from torchvision's and timm's sources, so a
    misspelled name is refused without importing either (or torch). A fresh interpreter, so that nothing the suite
    imported hides an import."""
    import subprocess

    code = ("import sys\nfrom roofline import cli\nrc = cli.main(['profile', 'resnt50'])\n"
            "print(rc, sorted(m for m in ('torch', 'torchvision', 'timm', 'transformers') if m in sys.modules))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(roofline.__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=env)
    assert p.stdout.split("\n")[0] == "1 []", (p.stdout, p.stderr)
    assert "unknown model 'resnt50'" in p.stderr and "did you mean 'resnet50'" in p.stderr


def test_the_names_read_from_the_sources_are_those_the_libraries_list():
    """The names read without importing agree with what torchvision and timm list (the installed versions): a
    model either lists is accepted, and a name neither lists is refused."""
    from roofline import _profile_cmd as pc

    tv = pytest.importorskip("torchvision")
    assert sorted(pc.registered_names("torchvision", "models", recursive=False)) == \
        sorted(tv.models.list_models(module=tv.models))
    timm = pytest.importorskip("timm")
    assert sorted(pc.registered_names("timm", "models", recursive=True)) == sorted(timm.list_models())
    assert pc.registered_names("no_such_package_xyz", "models", recursive=True) is None


def test_an_unknown_layout_falls_back_to_asking_the_library(monkeypatch):
    from roofline import _profile_cmd as pc

    pytest.importorskip("torchvision")
    monkeypatch.setattr(pc, "registered_names", lambda *a, **k: None)
    assert "resnet18" in pc._torchvision_names()


def test_devices_lists_the_datasheet_table(capsys):
    from roofline import devices

    rc, out, err = _run(["devices"], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["Device", "Vendor"]
    h100 = next(line for line in lines if line.startswith("H100 SXM "))
    # H100 SXM's datasheet: 3.35 TB/s, 80 GB, FP64 33.5, FP32 67, TF32 494.5, BF16 989, FP16 989, FP8 1979, INT8 1979
    assert h100.split()[2:] == ["NVIDIA", "3.35", "80", "33.5", "67", "494.5", "989", "989", "1979", "1979"]
    assert len(lines) == 1 + len(devices.names())
    rc, out, err = _run(["devices", "--json"], capsys)
    table = json.loads(out)
    assert [d["name"] for d in table] == devices.names()
    assert next(d for d in table if d["name"] == "H100 SXM")["peaks"]["matrix/bfloat16"] == 989e12


@pytest.mark.parametrize("name", ["H100 SXMM", "a100", "h300", "RTX 409"])
def test_close_device_matches_are_known_devices_that_are_accepted(name, capsys):
    """Every close match offered is in the "Known devices" list of the same message, and is accepted."""
    from roofline import devices

    rc, out, err = _run(["profile", "test_cli_profile:tiny_adam", "--project", name], capsys)
    assert rc == 1
    known = err.split("Known devices: ")[1].split(" (python -m roofline devices")[0].split(", ")
    assert known == devices.names()
    offered = err.split("did you mean ")[1].split("?")[0].split(" or ") if "did you mean" in err else []
    offered = [o.strip("'") for o in offered]
    assert offered and set(offered) <= set(known)
    assert all(devices.lookup(o) is not None for o in offered)


BROKEN_STEP = """\
def deep():
    raise ZeroDivisionError("inside the user's helper")


def build(device, batch, seq, train):
    deep()
"""


@pytest.mark.parametrize("where", ["after", "before"])
def test_traceback_prints_the_full_traceback_of_the_users_error(where, tmp_path, capsys):
    script = tmp_path / "userstep.py"
    script.write_text(BROKEN_STEP)
    argv = ["profile", f"{script}:build"]
    argv = argv + ["--traceback"] if where == "after" else ["--traceback"] + argv
    rc, out, err = _run(argv, capsys)
    assert rc == 1
    assert "Traceback (most recent call last)" in err
    # both frames of the user's file, outermost first, and the package's frames between
    assert err.index(f'File "{script}", line 6, in build') < err.index(f'File "{script}", line 2, in deep')
    assert "_profile_cmd.py" in err
    assert err.rstrip().endswith("roofline profile: error: ZeroDivisionError: inside the user's helper")
    # without it: one located line, and the hint
    rc, out, err = _run(["profile", f"{script}:build"], capsys)
    assert "Traceback" not in err and f"at {script}:2, in deep" in err and "--traceback" in err


def test_traceback_shows_an_error_while_importing_the_users_file(tmp_path, capsys):
    script = tmp_path / "broken_import.py"
    script.write_text("CONFIG = {}\nWIDTH = CONFIG['width']\n")
    rc, out, err = _run(["profile", f"{script}:build", "--traceback"], capsys)
    assert rc == 1 and f'File "{script}", line 2, in <module>' in err and "KeyError: 'width'" in err
