"""Every .cu source compiles through NVRTC for sm_80 and sm_90, without a GPU."""

from __future__ import annotations

import pytest

from bmsparse import _kernels

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

FILES = sorted(_kernels.registered())


def test_every_cu_file_is_registered():
    on_disk = sorted(str(p.relative_to(_kernels.PACKAGE_DIR))
                     for p in _kernels.PACKAGE_DIR.rglob("*.cu"))
    assert on_disk == FILES


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("path", FILES)
def test_compiles(path, arch):
    code = _kernels.source(path)
    program = nvrtc.createProgram(code, path, [], [])
    expressions = _kernels.name_expressions(path)
    for expr in expressions:
        nvrtc.addNameExpression(program, expr)
    options = [f"--gpu-architecture={arch}", *_kernels.COMPILE_OPTIONS]
    try:
        nvrtc.compileProgram(program, options)
    except nvrtc.NVRTCError as exc:
        pytest.fail(f"{path} does not compile for {arch}: {exc}\n"
                    f"{nvrtc.getProgramLog(program)}")
    for expr in expressions:
        assert nvrtc.getLoweredName(program, expr)
    log = nvrtc.getProgramLog(program).strip()
    assert "warning" not in log.lower(), log
