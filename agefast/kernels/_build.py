"""Compile the batch kernel with Numba into native code that runs without Numba.

Numba compiles _engine.batch_c as a C function (a cfunc over raw pointers,
every buffer passed in by the caller, so it needs nothing of Numba's runtime);
its final LLVM module becomes an object file for the CPU Numba compiles for,
emitted by Numba's own target machine, and, where a C compiler driver can
link it, a shared library. agefast.kernels keeps the result in its cache
(_cache), and later processes load it without importing numba (_native).
"""

import os
import shlex
import shutil
import subprocess

import llvmlite.binding as ll
from numba import cfunc, types

from . import _abi, _engine

# The cfunc wrapper Numba generates reports a failed call through Numba's C
# runtime and CPython (numba_gil_ensure, numba_do_raise, PyErr_*), which a
# process without numba does not have. The kernels raise nothing (there is no
# raise in _engine's batch call graph; Numba's status checks after each call
# are generic), so that wrapper is dropped and this one takes its place: the
# same C signature, -1 for a failed status. Numba's array decref, which stays,
# calls NRT_MemInfo_call_dtor when a reference count reaches zero; every array
# here is a carray view without a memory owner, so that never happens.
_WRAPPER = """
declare i32 @{inner}(ptr, ptr, ptr, i64, ptr, i64, ptr, i64, i64, i64, ptr)
define i64 @{symbol}(ptr %key, i64 %counter, ptr %src, i64 %n, ptr %dst, i64 %m, i64 %final, i64 %mode,
                     ptr %scratch) {{
  %result = alloca i64
  %error = alloca ptr
  %status = call i32 @{inner}(ptr %result, ptr %error, ptr %key, i64 %counter, ptr %src, i64 %n, ptr %dst,
                              i64 %m, i64 %final, i64 %mode, ptr %scratch)
  %ok = icmp eq i32 %status, 0
  %value = load i64, ptr %result
  %out = select i1 %ok, i64 %value, i64 -1
  ret i64 %out
}}
define void @NRT_MemInfo_call_dtor(ptr %meminfo) {{
  ret void
}}
"""
# What the object may leave to the process: the C library's memory functions.
_EXTERNAL = ("memcpy", "memset", "memmove")


def _signature():
    return getattr(types, _abi.BATCH_RESULT)(*(getattr(types, name) for name in _abi.BATCH_ARGS))


def compile_object():
    """(object file bytes, CPU name, CPU features) of the batch kernel: Numba's cold compile (seconds).

    The object defines one function, _abi.SYMBOL, and needs nothing but the C library.
    """
    compiled = cfunc(_signature(), error_model="numpy", boundscheck=False)(_engine.batch_c)
    library = compiled._library
    codegen = library.codegen
    machine = codegen._tm
    module = ll.parse_assembly(library.get_llvm_str())
    inner = compiled.native_name.removeprefix("cfunc.")
    module.link_in(ll.parse_assembly(_WRAPPER.format(inner=inner, symbol=_abi.SYMBOL)))
    # everything but our wrapper becomes private to the object, so the pass
    # below drops Numba's wrapper and whatever only it used
    for value in (*module.functions, *module.global_variables):
        if not value.is_declaration and value.name != _abi.SYMBOL:
            value.linkage = "internal"
    passes = ll.create_new_module_pass_manager()
    passes.add_global_dead_code_eliminate_pass()
    passes.run(module, ll.create_pass_builder(machine, ll.create_pipeline_tuning_options()))
    unresolved = sorted(f.name for f in module.functions
                        if f.is_declaration and not f.name.startswith("llvm.") and f.name not in _EXTERNAL)
    if unresolved:
        raise RuntimeError(f"the compiled kernel needs symbols outside the C library: {unresolved}")
    return machine.emit_object(module), codegen._get_host_cpu_name(), codegen._get_host_cpu_features()


def link_shared(obj: bytes, directory: str) -> str | None:
    """Link the object into a shared library in `directory` with the C compiler driver ($CC, else cc).

    Its path, or None where there is no driver or it fails: then the object
    file itself is cached and loaded by llvmlite (_native.load_object).
    """
    driver = shlex.split(os.environ.get("CC") or "cc")
    if not driver or shutil.which(driver[0]) is None:
        return None
    src = os.path.join(directory, "batch.o")
    out = os.path.join(directory, "batch.so")
    with open(src, "wb") as f:
        f.write(obj)
    done = subprocess.run([*driver, "-shared", "-nostdlib", "-o", out, src], capture_output=True)
    return out if done.returncode == 0 else None
