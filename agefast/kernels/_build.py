"""Compile the kernels' C functions with Numba into native code that runs without Numba.

Numba compiles _aead.batch_c and _file_io.file_batches_c as C functions (cfuncs
over raw pointers, every buffer passed in by the caller, so they need nothing
of Numba's runtime); their final LLVM modules, linked into one, become an
object file for the CPU Numba compiles for, emitted by Numba's own target
machine, and, where a C compiler driver can link it, a shared library.
agefast.kernels keeps the result in its cache (_cache), and later processes
load it without importing numba (_native).
"""

import contextlib
import os
import re
import shlex
import shutil
import subprocess

import llvmlite.binding as ll
from numba import cfunc, config, types
from numba.core import codegen as _codegen
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import cpu_target

from . import _abi, _aead, _file_io, _shipped
from ..io import trust

# The cfunc wrapper Numba generates reports a failed call through Numba's C
# runtime and CPython (numba_gil_ensure, numba_do_raise, PyErr_*), which a
# process without numba does not have. The kernels raise nothing (there is no
# raise in the kernels' call graphs; Numba's status checks after each call are
# generic), so that wrapper is dropped and this one takes its place: the
# same C signature, -1 for a failed status. Numba's array decref, which stays,
# calls NRT_MemInfo_call_dtor when a reference count reaches zero; every array
# here is a carray view without a memory owner, so that never happens.
_WRAPPER = """
declare i32 @{inner}(ptr, ptr, {types})
define i64 @{symbol}({params}) {{
  %result = alloca i64
  %error = alloca ptr
  %status = call i32 @{inner}(ptr %result, ptr %error, {params})
  %ok = icmp eq i32 %status, 0
  %value = load i64, ptr %result
  %out = select i1 %ok, i64 %value, i64 -1
  ret i64 %out
}}
define void @NRT_MemInfo_call_dtor(ptr %meminfo) {{
  ret void
}}
"""
_LLVM_TYPES = {"voidptr": "ptr", "uint64": "i64", "int64": "i64"}
# What the object may leave to the process: the C library's memory functions,
# and file_batches' file I/O and mutex.
_EXTERNAL = ("memcpy", "memset", "memmove", "pread", "pwrite", "pthread_mutex_lock", "pthread_mutex_unlock")
# Each C function: (symbol, its Python in _aead or _file_io, argument and result type names).
_FUNCTIONS = ((_abi.SYMBOL, _aead.batch_c, _abi.BATCH_ARGS, _abi.BATCH_RESULT),
              (_abi.FILE_SYMBOL, _file_io.file_batches_c, _abi.FILE_ARGS, _abi.FILE_RESULT))


class _IRLibrary(_codegen.JITCodeLibrary):
    """A Numba code library finalized to its LLVM IR alone: no machine code, no module passes.

    Numba's JIT emits machine code for every library it finalizes (each
    helper the kernels call, each C function, every callee linked into each
    again), then compile_object reads only the two C functions' LLVM IR and
    emits that once: the machine code nobody ran was most of the cold
    compile. The module passes, likewise, compile_object runs once on the
    linked module instead of on each library's (docs/engine.md).
    """

    def _finalize_specific(self):
        pass

    def _optimize_final_module(self):
        # Numba optimizes each library's final module, and each holds every
        # callee linked in again: the ChaCha20 and stitched bodies went
        # through the module passes once per caller up the chain (nine
        # times, ~1.1 s each on the avx2 build). compile_object runs them
        # once, on the module of both C functions.
        pass

    def get_pointer_to_function(self, name):
        # Numba asks for the address of each CPython wrapper and C function
        # it compiles: finalized, with no address, as nothing made here runs
        # in this process (compile_object takes the IR)
        self._ensure_finalized()
        return 0


@contextlib.contextmanager
def _ir_only():
    """Numba's libraries made while this runs are _IRLibrary's, never added to the JIT.

    Numba's compiler lock is held throughout, so another thread's compile
    never meets this; its runtime library (NRT, which jitted code does call)
    is compiled before, as usual.
    """
    context = cpu_target.target_context
    with global_compiler_lock:
        context.refresh()
        codegen = context.codegen()
        codegen._library_class = _IRLibrary
        codegen._add_module = lambda module: None
        codegen.set_env = lambda env_name, env: None
        try:
            yield
        finally:
            del codegen._library_class, codegen._add_module, codegen.set_env


def _signature(args, result):
    return getattr(types, result)(*(getattr(types, name) for name in args))


def _module(symbol, python, args, result):
    """The LLVM module of one C function, everything in it but `symbol` private; and Numba's codegen."""
    compiled = cfunc(_signature(args, result), error_model="numpy", boundscheck=False)(python)
    library = compiled._library
    module = ll.parse_assembly(library.get_llvm_str())
    llvm = [_LLVM_TYPES[name] for name in args]
    module.link_in(ll.parse_assembly(_WRAPPER.format(
        inner=compiled.native_name.removeprefix("cfunc."), symbol=symbol, types=", ".join(llvm),
        params=", ".join(f"{t} %a{i}" for i, t in enumerate(llvm)))))
    # everything but our wrapper becomes private to the object, so the module
    # passes in compile_object drop Numba's wrapper and whatever only it used, and
    # the modules of the two functions link without clashing names; but
    # linkonce_odr functions (_common._call_outlined's bodies, the same in
    # both) stay mergeable, so the object has one copy of each
    for value in (*module.functions, *module.global_variables):
        if not value.is_declaration and value.name != symbol and value.linkage != ll.Linkage.linkonce_odr:
            value.linkage = "internal"
    return module, library.codegen


def _object_machine(codegen, cpu):
    """The target machine the object is emitted for: `cpu` (_object_cpu's), Numba's features, position-independent code.

    Numba's own (codegen._tm) is its JIT's: the large code model, where code
    reaches its constants by absolute address (movabs on x86-64; MOVZ/MOVK
    with R_AARCH64_MOVW_UABS_G* relocations on AArch64) and static
    relocations. GNU ld links x86-64's into a shared library only with text
    relocations (DT_TEXTREL: the loader patches the code pages) and refuses
    AArch64's ("relocation R_AARCH64_MOVW_UABS_G0_NC against `a local symbol'
    can not be used when making a shared object; recompile with -fPIC"), so
    there the shared library, and the shipped aarch64 class, never linked.
    This is the target machine of Numba's ahead-of-time compiler: PIC and the
    default (small) code model, linked without text relocations and loaded
    as well by MCJIT (_native.load_object) where no C compiler driver links it.
    """
    target = ll.Target.from_triple(ll.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=codegen._get_host_cpu_features(),
                                        opt=config.OPT, reloc="pic", codemodel="default")


def _object_cpu(codegen):
    """The CPU name the object is emitted for: LLVM's scheduling model and
    tuning; what instructions it may use are the features, Numba's (its
    NUMBA_CPU_FEATURES, else every feature of this CPU, each on or off).

    NUMBA_CPU_NAME where it is set, as for the shipped builds; else the name
    of the widest shipped class (_shipped.CLASSES) whose features the target
    has, so a build compiled here is tuned as that class's shipped build is.
    This CPU's own name made slower code: on Zen 4 the same kernels emitted
    for `znver4` sealed and opened ~10% slower than for `skylake-avx512`,
    whose tuning `x86-64-v4` has (docs/engine.md). A CPU of no class keeps
    its own name.
    """
    if config.CPU_NAME is None:
        have = _shipped.llvm_flags(codegen._get_host_cpu_features())
        cpu_class = _shipped.choose(os.uname().machine, have, frozenset(c.name for c in _shipped.CLASSES))
        if cpu_class is not None:
            return cpu_class.cpu
    return codegen._get_host_cpu_name()


def _optimize(module, codegen):
    """The module passes Numba's _optimize_final_module runs on a library's
    module (a cheap round, then the full one), run once on `module`."""
    cheap, cheap_builder = codegen._module_pass_manager(loop_vectorize=codegen._loopvect, slp_vectorize=False,
                                                        opt=codegen._opt_level, cost="cheap")
    cheap.run(module, cheap_builder)
    full, full_builder = codegen._module_pass_manager()
    full.run(module, full_builder)


_FEATURE = re.compile(r"[+-][A-Za-z0-9._-]+")


def refusal() -> str | None:
    """Why Numba, as it is set in this process, cannot compile the kernels, or None.

    Settings under which LLVM would end the process (a fatal error is no exception: it exits), or under which
    every compile fails after seconds and a quarter of a GiB, each process again: the kernels stay unloaded
    and cryptography runs the jobs (kernels.load_or_warn warns).
    """
    if config.CPU_FEATURES and not all(map(_FEATURE.fullmatch, config.CPU_FEATURES.split(","))):
        # LLVM aborts on a feature string that is not +name / -name items
        return f"NUMBA_CPU_FEATURES is not a list of +feature / -feature: {config.CPU_FEATURES[:100]!r}"
    if os.uname().machine in ("x86_64", "AMD64") and not config.ENABLE_AVX:
        # The kernels' vectors need AVX: LLVM dies allocating their registers ("constraint 'v'")
        return ("Numba compiles with AVX turned off (by NUMBA_ENABLE_AVX, a .numba_config.yaml here, or for a CPU "
                f"name it does not trust with AVX: {config.CPU_NAME or ll.get_host_cpu_name()}); the kernels need it")
    if int(config.OPT) == 0:
        # Unoptimised, the code keeps calls into Numba's runtime, which the library cannot have
        return "NUMBA_OPT=0 leaves calls into Numba's runtime in the kernels"
    return None


def compile_object():
    """(object file bytes, CPU name, CPU features) of the kernels' C functions: Numba's cold compile (seconds).

    The object defines _abi.SYMBOL and _abi.FILE_SYMBOL and needs nothing but the C library.
    """
    with _ir_only():
        modules = [_module(*function) for function in _FUNCTIONS]
    module, codegen = modules[0]
    for other, _ in modules[1:]:
        module.link_in(other)
    for value in (*module.functions, *module.global_variables):
        if value.linkage == ll.Linkage.linkonce_odr:
            value.linkage = "internal"
    _optimize(module, codegen)
    unresolved = sorted(f.name for f in module.functions
                        if f.is_declaration and not f.name.startswith("llvm.") and f.name not in _EXTERNAL)
    if unresolved:
        raise RuntimeError(f"the compiled kernel needs symbols outside the C library: {unresolved}")
    cpu = _object_cpu(codegen)
    return _object_machine(codegen, cpu).emit_object(module), cpu, codegen._get_host_cpu_features()


# The link: a shared library that needs nothing (not even the C library's
# start files) but the symbols of _EXTERNAL, resolved when it is loaded.
# GNU ld's build ID is a hash of the output, so it stays reproducible.
_LINK_FLAGS = ("-shared", "-nostdlib")


# Where the driver looks for its own programs and files besides PATH (gcc's and clang's): not passed on.
_DRIVER_SEARCH = frozenset({"COMPILER_PATH", "GCC_EXEC_PREFIX", "LIBRARY_PATH"})
# The arguments a $CC may hold: the target's and the build's own (-m64, -march=..., --target=..., -O2, -g, -v).
# Any other may name a folder or a program the driver then runs or reads (-B and --prefix: where its linker
# is found; a sysroot, a linker, specs, a wrapper, a plugin, a response file, options passed to the linker):
# a $CC holding one links nothing.
_DRIVER_ARGUMENT = re.compile(r"-m(?!llvm)[\w=.,+-]*|--target=[\w.-]+|-O[0-3sz]?|-g\w*|-pipe|-v")


def _run(command: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run a command of the C compiler driver's, which looks up programs of its own (its linker, `ld`) on PATH:
    only in its trusted folders, never the current one nor one another account may write (agefast.io.trust),
    and nowhere else (_DRIVER_SEARCH)."""
    # With no trusted folder, an empty PATH would mean the current folder: one that holds no program instead.
    search = trust.trusted_search_path(os.environ.get("PATH", os.defpath)) or os.devnull
    env = {name: value for name, value in os.environ.items() if name not in _DRIVER_SEARCH}
    return subprocess.run(command, capture_output=True, env=dict(env, PATH=search))


def _driver() -> list[str] | None:
    """The C compiler driver that links ($CC, else cc), by the path it was found at, or None where there is none,
    where it is not this user's or root's alone to change (agefast.io.trust) or where $CC points it at other
    programs or files (_DRIVER_ARGUMENT): what it links is run. Without one the object is loaded by llvmlite."""
    driver = shlex.split(os.environ.get("CC") or "cc")
    found = shutil.which(driver[0]) if driver else None
    if found is None or trust.program_refusal(found) is not None:
        return None
    if not all(_DRIVER_ARGUMENT.fullmatch(arg) for arg in driver[1:]):
        return None
    return [found, *driver[1:]]


def linker() -> str:
    """The link command and the driver's and linker's versions, in one line: what a build's manifest records."""
    driver = _driver()
    if driver is None:
        return "none"

    def first_line(command: list[str]) -> str:
        try:
            out = _run(command).stdout
        except OSError:     # a program it named that PATH's trusted folders do not hold
            return "unknown"
        return (out.decode(errors="replace").strip().splitlines() or ["unknown"])[0]

    ld = first_line([*driver, "-print-prog-name=ld"])
    return f"{' '.join([*driver, *_LINK_FLAGS])}: {first_line([*driver, '--version'])}; {first_line([ld, '--version'])}"


def link_shared(obj: bytes, directory: str) -> str | None:
    """Link the object into a shared library in `directory` with the C compiler driver ($CC, else cc).

    Its path, or None where there is no driver or it fails: then the object
    file itself is cached and loaded by llvmlite (_native.load_object).
    """
    driver = _driver()
    if driver is None:
        return None
    src = os.path.join(directory, "batch.o")
    out = os.path.join(directory, "batch.so")
    with open(src, "wb") as f:
        f.write(obj)
    done = _run([*driver, *_LINK_FLAGS, "-o", out, src])
    return out if done.returncode == 0 else None
