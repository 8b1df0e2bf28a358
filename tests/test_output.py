"""Every file the package writes goes through roofline._util._output.write: a regular file is replaced atomically (a
failed write leaves the old file and no temporary file), a symbolic link is written through, a FIFO or a descriptor
is written into, and anything that is not a path (an int, which ``open`` takes for a descriptor) is a TypeError.
The command line's early checks never create, truncate or open the target."""

import contextlib
import json
import os
import resource
import signal
import stat
import threading

import pytest

import roofline
from roofline import cli
from roofline._util import _output

DATA = os.path.join(os.path.dirname(__file__), "data", "report_schema1.json")
OLD = b"the old content, kept\n"


@pytest.fixture(scope="module")
def report():
    return roofline.load(DATA)


def _writers(report):
    """(name, call(path)) of every public way to write a file, matplotlib's chart included when installed."""
    out = [("Report.to_json", report.to_json), ("Report.to_csv", report.to_csv),
           ("Report.to_chrome_trace", report.to_chrome_trace),
           ("Chart.save", report.roofline_chart().save)]
    try:
        import matplotlib  # noqa: F401

        out.append(("plot", report.plot))
    except ImportError:
        pass
    return out


WRITERS = ["Report.to_json", "Report.to_csv", "Report.to_chrome_trace", "Chart.save", "plot"]


def _writer(report, name):
    found = dict(_writers(report))
    if name not in found:
        pytest.skip(f"{name} needs matplotlib")
    return found[name]


def _drain(fd) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


@contextlib.contextmanager
def _pipe_on(n):
    """Descriptor ``n`` pointed at a fresh pipe for the block (restored after, even if the code under test closed
    it); yields the pipe's read end."""
    r, w = os.pipe()
    saved = os.dup(n)
    os.dup2(w, n)
    os.close(w)
    try:
        yield r
    finally:
        os.dup2(saved, n)
        os.close(saved)
        os.close(r)


# ---- a number is not a path ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", WRITERS)
def test_an_int_is_refused_and_its_descriptor_left_open(report, name):
    write = _writer(report, name)
    r, w = os.pipe()
    try:
        with pytest.raises(TypeError) as e:
            write(w)
        assert name in str(e.value) and "path must be a file name" in str(e.value) and "int" in str(e.value)
        os.fstat(w)  # still open
        assert _drain(r) == b""  # nothing written into it
    finally:
        os.close(r)
        with contextlib.suppress(OSError):
            os.close(w)


@pytest.mark.parametrize("value, fd", [(True, 1), (False, 0), (1.5, None), (["r.json"], None)],
                         ids=["True", "False", "float", "list"])
def test_a_bool_float_or_list_is_refused(report, value, fd):
    with _pipe_on(fd) if fd is not None else contextlib.nullcontext() as r:
        for name, write in _writers(report):
            with pytest.raises(TypeError, match=name.replace(".", r"\.") + ": path must be a file name"):
                write(value)
            if r is not None:
                os.fstat(fd)
                assert _drain(r) == b""


def test_an_int_given_to_to_json_gets_a_hint(report):
    with _pipe_on(1) as r:
        with pytest.raises(TypeError, match=r"for indented text: indent=1"):
            report.to_json(1)
        os.fstat(1)
        assert _drain(r) == b""
    assert json.loads(report.to_json(indent=1)) == json.loads(report.to_json())  # the indent is a keyword


def test_bytes_and_pathlike_are_paths(report, tmp_path):
    report.to_json(tmp_path / "a.json")
    report.to_json(os.fsencode(tmp_path / "b.json"))
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text() == report.to_json()


def test_empty_name_and_folder_are_clear_errors(report, tmp_path):
    with pytest.raises(ValueError, match="Report.to_json: the file name is empty"):
        report.to_json("")
    with pytest.raises(IsADirectoryError, match="Report.to_csv: .* is a folder"):
        report.to_csv(tmp_path)
    assert os.listdir(tmp_path) == []


# ---- a failed write keeps the old file ----------------------------------------------------------------------------

@contextlib.contextmanager
def _file_size_limit(nbytes):
    """Writes past ``nbytes`` of any regular file fail with EFBIG (RLIMIT_FSIZE; SIGXFSZ ignored) in the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


def _failed_write_keeps(tmp_path, target, call):
    target.write_bytes(OLD)
    with _file_size_limit(1024):  # every report file here is larger
        with pytest.raises(OSError) as e:
            call()
    assert e.value.errno == 27 or "too large" in str(e.value).lower()  # EFBIG
    assert target.read_bytes() == OLD
    assert sorted(os.listdir(target.parent)) == [target.name]  # no temporary file left


@pytest.mark.parametrize("name", WRITERS)
def test_a_write_failing_midway_leaves_the_old_file(report, tmp_path, name):
    write = _writer(report, name)
    target = tmp_path / "out.svg"  # the chart's format; the others do not mind the name
    _failed_write_keeps(tmp_path, target, lambda: write(str(target)))


def test_merge_o_failing_midway_leaves_the_old_file(tmp_path, capsys):
    target = tmp_path / "merged.json"
    target.write_bytes(OLD)
    with _file_size_limit(1024):
        rc = cli.main(["merge", DATA, DATA, "-o", str(target)])
    assert rc == 1 and "File too large" in capsys.readouterr().err
    assert target.read_bytes() == OLD
    assert sorted(os.listdir(tmp_path)) == ["merged.json"]


@pytest.mark.parametrize("fail_at", ["write", "fsync", "replace"])
@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()],
                         ids=["ENOSPC", "KeyboardInterrupt"])
def test_any_failure_removes_the_temporary_file(report, tmp_path, monkeypatch, fail_at, exc):
    target = tmp_path / "r.json"
    target.write_bytes(OLD)
    seen = []

    def boom(*a, **k):
        seen.append(a)
        if fail_at == "write":  # half the data, then the failure
            os.write(a[0], bytes(a[1])[: len(a[1]) // 2])
        raise exc

    if fail_at == "write":
        monkeypatch.setattr(_output, "_write_all", boom)
    else:
        monkeypatch.setattr(_output.os, fail_at, boom)
    with pytest.raises(type(exc)):
        report.to_json(target)
    monkeypatch.undo()
    assert seen
    assert target.read_bytes() == OLD
    assert os.listdir(tmp_path) == ["r.json"]


def test_replacing_keeps_the_permission_bits_and_a_new_file_gets_the_umask(report, tmp_path):
    old = tmp_path / "old.json"
    old.write_bytes(OLD)
    os.chmod(old, 0o640)
    report.to_json(old)
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o640 and old.read_text() == report.to_json()
    umask = os.umask(0o022)
    os.umask(umask)
    new = tmp_path / "new.json"
    report.to_json(new)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o666 & ~umask


def test_a_replaced_file_is_a_new_inode_so_a_reader_never_sees_a_part(report, tmp_path):
    target = tmp_path / "r.json"
    target.write_bytes(OLD)
    with open(target, "rb") as reader:  # opened before the write: still reads the old file whole
        before = os.stat(target).st_ino
        report.to_json(target)
        assert reader.read() == OLD
    assert os.stat(target).st_ino != before and json.loads(target.read_text())["schema"] == 1


# ---- symbolic links -----------------------------------------------------------------------------------------------

def test_a_symlink_is_written_through_and_stays_a_link(report, tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "r.csv"
    target.write_bytes(OLD)
    os.chmod(target, 0o600)
    link = tmp_path / "link.csv"
    os.symlink(os.path.join("real", "r.csv"), link)  # relative, as users make them
    report.to_csv(link)
    assert os.path.islink(link) and os.readlink(link) == os.path.join("real", "r.csv")
    assert target.read_bytes() == report.to_csv().encode() and stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert sorted(os.listdir(tmp_path / "real")) == ["r.csv"]


def test_a_dangling_symlink_creates_its_target(report, tmp_path):
    link = tmp_path / "r.json"
    os.symlink(tmp_path / "saved" / "r.json", link)
    with pytest.raises(FileNotFoundError):  # the folder the link points into does not exist
        report.to_json(link)
    assert os.path.islink(link) and not os.path.exists(tmp_path / "saved")
    (tmp_path / "saved").mkdir()
    report.to_json(link)
    assert os.path.islink(link) and (tmp_path / "saved" / "r.json").read_text() == report.to_json()


def test_a_symlink_loop_is_an_error(report, tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    with pytest.raises(OSError) as e:
        report.to_json(tmp_path / "a")
    assert e.value.errno == 40  # ELOOP
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


# ---- FIFOs, devices and descriptors -------------------------------------------------------------------------------

def _read_fifo(path, got):
    with open(path, "rb") as f:
        got.append(f.read())


def test_a_fifo_is_written_into(report, tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
    t.start()
    text = report.to_chrome_trace(fifo)
    t.join(timeout=30)
    assert got == [text.encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["trace.fifo"]


def test_dev_null_is_written_into_not_replaced(report):
    before = os.stat("/dev/null")
    report.to_json("/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_dev_fd_writes_to_the_descriptor_at_its_offset_and_leaves_it_open(report, tmp_path):
    """/dev/stdout and friends: the process's own descriptor, so output redirected to a file is appended where the
    process's own writes are, not truncated and not replaced."""
    log = tmp_path / "stdout.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"before\n")
        report.to_json(f"/dev/fd/{fd}")
        os.write(fd, b"\nafter\n")
        report.to_csv(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    assert log.read_bytes() == (b"before\n" + report.to_json().encode() + b"\nafter\n" + report.to_csv().encode())


def test_dev_stdout_flushes_python_stdout_first(report, capfd):
    print("first", end="|", flush=False)
    report.to_json("/dev/stdout")
    assert capfd.readouterr().out == "first|" + report.to_json()


# ---- the command line's early check never touches the target ------------------------------------------------------

def test_check_writable_creates_truncates_and_opens_nothing(tmp_path):
    new = tmp_path / "new.json"
    _output.check_writable(str(new), "--json")
    assert not new.exists()
    old = tmp_path / "old.json"
    old.write_bytes(OLD)
    os.utime(old, (1_000_000_000, 1_000_000_000))
    _output.check_writable(str(old), "--json")
    st = os.stat(old)
    assert old.read_bytes() == OLD and st.st_mtime == 1_000_000_000 and st.st_atime == 1_000_000_000
    link = tmp_path / "dangling.json"
    os.symlink(tmp_path / "target.json", link)
    _output.check_writable(str(link), "--json")
    assert os.path.islink(link) and not (tmp_path / "target.json").exists()
    assert sorted(os.listdir(tmp_path)) == ["dangling.json", "old.json"]


def test_check_writable_does_not_open_a_fifo(tmp_path):
    """Opening a FIFO for writing would block without a reader, and give a waiting reader its end of file."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    _output.check_writable(str(fifo), "--json")  # returns at once: no reader is needed
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("path, message", [
    ("{tmp}", "is a folder"), ("{tmp}/no/such/r.json", "does not exist"), ("/proc/r.json", "not writable"),
    ("{tmp}/loop", "not writable"), ("", "the file name is empty"),
])
def test_check_writable_errors(tmp_path, path, message):
    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(ValueError, match=message):
        _output.check_writable(path.format(tmp=tmp_path), "--json")
    assert os.listdir(tmp_path) == ["loop"]


def test_merge_dash_o_dash_prints_the_json_alone_on_stdout(capsys):
    assert cli.main(["merge", DATA, DATA, "-o", "-"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["format"] == "roofline-merged" and len(doc["ranks"]) == 2
    assert "2 ranks" in out.err


def test_merge_checks_its_output_before_reading(tmp_path, capsys):
    rc = cli.main(["merge", str(tmp_path / "missing.json"), "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and f"-o {str(tmp_path)!r} is a folder" in err and "missing.json" not in err
    assert os.listdir(tmp_path) == []
